// DeviceTableRef: the trivially copyable view of a DeviceTable that kernels
// and host-runner tasks take by value (after cuCollections' device refs).
// It holds raw pointers into the table's runner memory, the probing logic and
// the per-key steps of every DeviceTable call (find-or-insert, assign, pin,
// erase, export), written once: the CUDA kernels and the host runner's tasks
// differ only in how they spread keys over threads.
//
// Layout (structure of arrays, `slots` = num_buckets * kBucketSlots):
//   keys[slots]      uint64 key of a slot (meaningful only when occupied)
//   states[slots]    kSlotEmpty / kSlotBusy (being written) / kSlotOccupied;
//                    on the GPU, during an insert call, kSlotClaimed + i
//                    (claimed by key i of the batch; see device_table_gpu.cu)
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
#include <type_traits>

#include "base/hash.h"
#include "kernels/hd.h"
#include "kernels/initializer.h"
#include "kernels/limits.h"
#include "kernels/optimizer.h"
#include "strata/types.h"

namespace strata::kernels {

inline constexpr uint32_t kSlotEmpty = 0;
inline constexpr uint32_t kSlotBusy = 1;
inline constexpr uint32_t kSlotOccupied = 2;
// GPU insert calls only: a slot claimed by key i of the running batch holds
// kSlotClaimed + i until a later kernel of the same call publishes it
// (kSlotOccupied), so a thread that finds it claimed learns whose key it
// holds from the state word alone (device_table_gpu.cu, TileFindOrClaim).
inline constexpr uint32_t kSlotClaimed = 4;
static_assert(kBatchKeysMax <= ~uint32_t{0} - kSlotClaimed, "a claim tag fits the state word");
inline constexpr uint64_t kNoSlot = ~uint64_t{0};
// A batch's per-key slot ids are 32-bit (slots < 2^32); this marks "none".
inline constexpr uint32_t kNoSlot32 = ~uint32_t{0};

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

// Rows moving out of (EvictCandidates) or across (ExportAll) the table; all
// arrays are runner memory with room for the requested number of rows.
struct RowBatch {
  Key* keys = nullptr;
  float* rows = nullptr;  // count * row_floats
  int64_t* next_use = nullptr;
  uint8_t* dirty = nullptr;
  uint64_t count = 0;
};

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

  // ---- Per-key steps of DeviceTable's calls, the same on both runners ----

  // FindOrInsert of one key: finds it, or claims a slot and publishes a fresh
  // row (InitRow; next_use as given, clean, unpinned). kFull: no room within
  // the probe bound, nothing changed.
  STRATA_HD ClaimResult FindOrInsert(Key key, const InitializerOptions& init,
                                     const OptimizerOptions& opt, int64_t next_use_value,
                                     uint64_t* slot_out) const {
    const ClaimResult r = FindOrClaim(key, slot_out);
    if (r == ClaimResult::kClaimed) {
      const uint64_t s = *slot_out;
      InitRow(init, opt, key, dim, Row(s));
      next_use[s] = next_use_value;
      pins[s] = 0;
      dirty[s] = 0;
      Publish(s);
    }
    return r;
  }

  // InsertOrAssign, pass 1, for key i of the batch: finds the key or
  // publishes a new unpinned slot for it (its row is written in pass 2), and
  // bids for the slot's ownership: the last occurrence of a key wins.
  // Returns the slot, or kNoSlot32 when there is no room.
  STRATA_HD uint32_t ClaimOwner(Key key, uint64_t i, uint32_t* owner) const {
    uint64_t s = kNoSlot;
    const ClaimResult r = FindOrClaim(key, &s);
    if (r == ClaimResult::kFull) return kNoSlot32;
    if (r == ClaimResult::kClaimed) {
      pins[s] = 0;
      Publish(s);
    }
    detail::AtomicMax(&owner[s], static_cast<uint32_t>(i + 1));
    return static_cast<uint32_t>(s);
  }
  // Pass 2: whether key i owns `slot` (it writes the row and metadata).
  STRATA_HD bool Owns(const uint32_t* owner, uint32_t slot, uint64_t i) const {
    return slot != kNoSlot32 && detail::LoadRelaxed(&owner[slot]) == i + 1;
  }
  // Pass 2, the owner's metadata: next_use[i] (null: kClockNever) and
  // dirty[i] (null: clean).
  STRATA_HD void AssignMeta(uint64_t slot, const int64_t* next_use_in, const uint8_t* dirty_in,
                            uint64_t i) const {
    next_use[slot] = next_use_in != nullptr ? next_use_in[i] : kClockNever;
    dirty[slot] = dirty_in != nullptr ? dirty_in[i] : 0;
  }

  // Erase, Pin, Unpin or SetNextUse (detail::kOp*) of a resident slot.
  STRATA_HD void ApplyOp(int op, uint64_t slot, int64_t next_use_value) const {
    switch (op) {
      case detail::kOpErase:
        (void)Release(slot);
        break;
      case detail::kOpPin:
        detail::AtomicAdd(&pins[slot], 1u);
        break;
      case detail::kOpUnpin:
        (void)detail::AtomicDecrementToZero(&pins[slot]);
        break;
      case detail::kOpSetNextUse:
        detail::StoreRelaxed(&next_use[slot], next_use_value);
        break;
    }
  }

  // Push, pass 1: the slot of a key that must be resident, or kNoSlot32.
  STRATA_HD uint32_t Locate(Key key) const {
    const uint64_t s = Find(key);
    return s == kNoSlot ? kNoSlot32 : static_cast<uint32_t>(s);
  }

  // Scans (export, eviction) between batches: a resident row, and one that
  // may be evicted (resident and unpinned).
  STRATA_HD bool Occupied(uint64_t slot) const { return states[slot] == kSlotOccupied; }
  STRATA_HD bool Evictable(uint64_t slot) const { return Occupied(slot) && pins[slot] == 0; }
  // Copies slot's key, row, next_use and dirty flag to entry `pos` of out.
  STRATA_HD void Export(uint64_t slot, const RowBatch& out, uint64_t pos) const {
    out.keys[pos] = keys[slot];
    const float* src = Row(slot);
    float* dst = out.rows + pos * row_floats;
    for (uint32_t d = 0; d < row_floats; ++d) dst[d] = src[d];
    out.next_use[pos] = next_use[slot];
    out.dirty[pos] = dirty[slot];
  }
};
static_assert(std::is_trivially_copyable_v<DeviceTableRef>, "kernels take it by value");

}  // namespace strata::kernels
