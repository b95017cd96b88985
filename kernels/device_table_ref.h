// DeviceTableRef: the trivially copyable view of a DeviceTable that kernels
// and host-runner tasks take by value (after cuCollections' device refs).
// It holds raw pointers into the table's runner memory and the probing logic,
// written once for both runners.
//
// Layout (structure of arrays, `slots` = num_buckets * kBucketSlots):
//   keys[slots]      uint64 key of a slot (meaningful only when occupied)
//   states[slots]    kSlotEmpty / kSlotBusy (being written) / kSlotOccupied
//   rows[slots * row_floats]  fp32 embedding then optimizer state
//   next_use[slots]  int64 clock of the row's next use (eviction order)
//   pins[slots]      pin count; pinned rows are never evicted
//   dirty[slots]     1 when the row changed since it was last written down
//   overflow[buckets] 1 when a key passed this bucket to a later one
// Occupancy lives in `states`, so every 64-bit key is a valid key.
//
// Probing: a key's home bucket is MulHi64(MixMurmur64(key), num_buckets)
// (base/hash.h); it lives in the first probe_buckets buckets of its
// double-hashing sequence (see ProbeStep). A lookup scans a bucket and moves
// on only while that bucket's overflow flag is set (some insert found it full
// and went on).
//
// Thread safety: within one batched call many threads use a ref at once.
// Find is safe against concurrent readers; FindOrClaim is safe against
// concurrent FindOrClaim (same or other keys) and resolves duplicates: all
// callers with one key get the same slot and exactly one gets kClaimed. No
// call may run concurrently with Release (erase/evict run in their own batch).
#pragma once

#include <cstdint>

#include "base/hash.h"
#include "kernels/hd.h"
#include "kernels/limits.h"
#include "strata/types.h"

namespace strata::kernels {

inline constexpr uint32_t kSlotEmpty = 0;
inline constexpr uint32_t kSlotBusy = 1;
inline constexpr uint32_t kSlotOccupied = 2;
inline constexpr uint64_t kNoSlot = ~uint64_t{0};

namespace detail {
// Per-key operations of DeviceTable's ForEachFound back ends.
inline constexpr int kOpErase = 0;
inline constexpr int kOpPin = 1;
inline constexpr int kOpUnpin = 2;
inline constexpr int kOpSetNextUse = 3;
// 64-bit words of a table's counter block: [0] is the row count; the GPU
// back end keeps its error record and scratch in the rest.
inline constexpr int kTableCounterWords = 272;
}  // namespace detail

enum class ClaimResult : uint8_t { kFound, kClaimed, kFull };

struct DeviceTableRef {
  Key* keys;
  uint32_t* states;
  float* rows;
  int64_t* next_use;
  uint32_t* pins;
  uint8_t* dirty;
  uint32_t* overflow;
  uint64_t* size;
  uint64_t num_buckets;
  uint32_t dim;
  uint32_t row_floats;
  uint32_t probe_buckets;  // min(kProbeBucketsMax, num_buckets)

  STRATA_HD uint64_t slots() const { return num_buckets * kBucketSlots; }
  STRATA_HD uint64_t HomeBucket(Key key) const {
    return detail::MulHi64(MixMurmur64(key), num_buckets);
  }
  STRATA_HD float* Row(uint64_t slot) const { return rows + slot * row_floats; }
  // Double hashing over buckets: a key's probe sequence is home, home +
  // step, home + 2 step, ... (mod num_buckets) with a per-key step, so keys
  // that collide at home part ways (no primary clustering). Tables of at
  // most probe_buckets buckets probe linearly and so reach every bucket.
  STRATA_HD uint64_t ProbeStep(Key key) const {
    if (num_buckets <= probe_buckets) return 1;
    return 1 + detail::MulHi64(MixMurmur64(key ^ 0x2545f4914f6cdd1dULL), num_buckets - 1);
  }
  STRATA_HD uint64_t NextBucket(uint64_t bucket, uint64_t step) const {
    bucket += step;
    return bucket >= num_buckets ? bucket - num_buckets : bucket;
  }

  // Slot holding `key`, or kNoSlot. For batches without inserts (Find, Push,
  // Pin, Erase, ...): relaxed loads, key compared first.
  STRATA_HD uint64_t Find(Key key) const {
    uint64_t bucket = HomeBucket(key);
    const uint64_t step = ProbeStep(key);
    for (uint32_t p = 0; p < probe_buckets; ++p) {
      const uint64_t base = bucket * kBucketSlots;
      for (uint32_t j = 0; j < kBucketSlots; ++j) {
        if (keys[base + j] == key && detail::LoadRelaxed(&states[base + j]) == kSlotOccupied) {
          return base + j;
        }
      }
      if (overflow[bucket] == 0) return kNoSlot;
      bucket = NextBucket(bucket, step);
    }
    return kNoSlot;
  }

  // Finds `key` or claims an empty slot for it, in a batch where other
  // threads may be claiming. kClaimed: the slot is kSlotBusy with the key
  // written; the caller fills row and metadata, then calls Publish. kFull: no
  // empty slot within the probe bound; nothing changed.
  STRATA_HD ClaimResult FindOrClaim(Key key, uint64_t* slot_out) const {
    const uint64_t home = HomeBucket(key);
    const uint64_t step = ProbeStep(key);
    // Pass 1: rows published before this batch (erase may have left holes,
    // so the first empty slot does not end the search).
    uint64_t bucket = home;
    for (uint32_t p = 0; p < probe_buckets; ++p) {
      const uint64_t base = bucket * kBucketSlots;
      for (uint32_t j = 0; j < kBucketSlots; ++j) {
        if (detail::AtomicLoadAcquire(&states[base + j]) == kSlotOccupied &&
            keys[base + j] == key) {
          *slot_out = base + j;
          return ClaimResult::kFound;
        }
      }
      if (detail::AtomicLoadAcquire(&overflow[bucket]) == 0) break;
      bucket = NextBucket(bucket, step);
    }
    // Pass 2: claim the first empty slot in probe order. Every thread with
    // this key walks the same order and inspects each slot it cannot claim,
    // so duplicates meet at whichever slot was claimed first.
    bucket = home;
    for (uint32_t p = 0; p < probe_buckets; ++p) {
      const uint64_t base = bucket * kBucketSlots;
      for (uint32_t j = 0; j < kBucketSlots; ++j) {
        const uint64_t s = base + j;
        uint32_t state = detail::AtomicLoadAcquire(&states[s]);
        if (state == kSlotEmpty) {
          if (detail::AtomicCas(&states[s], kSlotEmpty, kSlotBusy)) {
            keys[s] = key;
            uint64_t passed = home;
            for (uint32_t q = 0; q < p; ++q) {
              detail::AtomicOr(&overflow[passed], 1u);
              passed = NextBucket(passed, step);
            }
            *slot_out = s;
            return ClaimResult::kClaimed;
          }
          state = detail::AtomicLoadAcquire(&states[s]);
        }
        while (state == kSlotBusy) state = detail::AtomicLoadAcquire(&states[s]);
        if (keys[s] == key) {
          *slot_out = s;
          return ClaimResult::kFound;
        }
      }
      bucket = NextBucket(bucket, step);
    }
    return ClaimResult::kFull;
  }

  // Makes a claimed slot visible (after its row and metadata are written).
  STRATA_HD void Publish(uint64_t slot) const {
    detail::AtomicStoreRelease(&states[slot], kSlotOccupied);
    detail::AtomicAdd(size, uint64_t{1});
  }

  // Frees an occupied slot; false when another thread freed it first.
  STRATA_HD bool Release(uint64_t slot) const {
    if (!detail::AtomicCas(&states[slot], kSlotOccupied, kSlotEmpty)) return false;
    detail::AtomicAdd(size, ~uint64_t{0});  // -1
    return true;
  }
};

}  // namespace strata::kernels
