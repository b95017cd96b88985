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
// Probing: a key's home bucket is MulHi64(Mix64(key), num_buckets); it lives
// in the first probe_buckets buckets from there (wrapping). A lookup scans a
// bucket and moves on only while that bucket's overflow flag is set.
//
// Thread safety: within one batched call many threads use a ref at once.
// Find is safe against concurrent readers; FindOrClaim is safe against
// concurrent FindOrClaim (same or other keys) and resolves duplicates: all
// callers with one key get the same slot and exactly one gets kClaimed. No
// call may run concurrently with Release (erase/evict run in their own batch).
#pragma once

#include <cstdint>

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
    return detail::MulHi64(detail::Mix64(key), num_buckets);
  }
  STRATA_HD float* Row(uint64_t slot) const { return rows + slot * row_floats; }
  STRATA_HD uint64_t NextBucket(uint64_t bucket) const {
    return bucket + 1 == num_buckets ? 0 : bucket + 1;
  }

  // Slot holding `key`, or kNoSlot. For batches without inserts (Find, Push,
  // Pin, Erase, ...): relaxed loads, key compared first.
  STRATA_HD uint64_t Find(Key key) const {
    uint64_t bucket = HomeBucket(key);
    for (uint32_t p = 0; p < probe_buckets; ++p) {
      const uint64_t base = bucket * kBucketSlots;
      for (uint32_t j = 0; j < kBucketSlots; ++j) {
        if (keys[base + j] == key && detail::LoadRelaxed(&states[base + j]) == kSlotOccupied) {
          return base + j;
        }
      }
      if (overflow[bucket] == 0) return kNoSlot;
      bucket = NextBucket(bucket);
    }
    return kNoSlot;
  }

  // Finds `key` or claims an empty slot for it, in a batch where other
  // threads may be claiming. kClaimed: the slot is kSlotBusy with the key
  // written; the caller fills row and metadata, then calls Publish. kFull: no
  // empty slot within the probe bound; nothing changed.
  STRATA_HD ClaimResult FindOrClaim(Key key, uint64_t* slot_out) const {
    const uint64_t home = HomeBucket(key);
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
      bucket = NextBucket(bucket);
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
            for (uint64_t b = home; b != bucket; b = NextBucket(b)) {
              detail::AtomicOr(&overflow[b], 1u);
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
      bucket = NextBucket(bucket);
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
