// DeviceTable's host runner: the per-key functions of device_table_ref.h,
// initializer.h and optimizer.h run from the shared ThreadPool. Calls finish
// before returning (streams are ignored).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/device_table.h"
#include "kernels/thread_pool.h"
#include "strata/options.h"

namespace strata::kernels {
namespace {

// Runs fn(i) for i in [0, n) on the shared pool.
template <class Fn>
void ForEachKey(uint64_t n, uint32_t threads, Fn&& fn) {
  ThreadPool::Shared().ParallelFor(n, kHostGrainKeys, threads, [&](uint64_t begin, uint64_t end) {
    for (uint64_t i = begin; i < end; ++i) fn(i);
  });
}

// Runs fn(i, slot) for i in [0, n) on the shared pool, where slot is
// ref.Find(keys[i]) (kNoSlot when absent), a group of keys at a time: the
// group's lookups go first, each prefetching the next group's home bucket
// and the first `prefetch_floats` floats of the row it found, so the cache
// misses of a group overlap instead of following one another.
template <class Fn>
void ForEachGroup(uint64_t n, uint32_t threads, const DeviceTableRef& ref, const Key* keys,
                  uint32_t prefetch_floats, Fn&& fn) {
  constexpr uint64_t kGroup = 16;
  constexpr uint32_t kLineFloats = 16;  // 64-byte cache lines
  // The range function captures one pointer, so std::function stores it
  // in place: no allocation per call.
  struct Context {
    const DeviceTableRef& ref;
    const Key* keys;
    uint32_t prefetch_floats;
    Fn& fn;
  } ctx{ref, keys, prefetch_floats, fn};
  ThreadPool::Shared().ParallelFor(n, kHostGrainKeys, threads,
                                   [&ctx](uint64_t begin, uint64_t end) {
                                     const DeviceTableRef& ref = ctx.ref;
                                     const Key* keys = ctx.keys;
                                     const uint32_t prefetch_floats = ctx.prefetch_floats;
                                     auto& fn = ctx.fn;
                                     uint64_t slots[kGroup];
                                     for (uint64_t g = begin; g < end; g += kGroup) {
                                       const uint64_t group_end = std::min(end, g + kGroup);
                                       for (uint64_t i = g; i < group_end; ++i) {
                                         if (i + kGroup < end) {
                                           const uint64_t bucket = ref.HomeBucket(keys[i + kGroup]);
                                           __builtin_prefetch(ref.keys + bucket * kBucketSlots);
                                           __builtin_prefetch(ref.states + bucket * kBucketSlots);
                                         }
                                         const uint64_t s = ref.Find(keys[i]);
                                         slots[i - g] = s;
                                         if (s == kNoSlot) continue;
                                         const float* row = ref.Row(s);
                                         for (uint32_t f = 0; f < prefetch_floats; f += kLineFloats)
                                           __builtin_prefetch(row + f);
                                       }
                                       for (uint64_t i = g; i < group_end; ++i) fn(i, slots[i - g]);
                                     }
                                   });
}

// Failures of a batch: how many and the first (lowest index).
struct FailureRecord {
  std::atomic<uint64_t> count{0};
  uint64_t first_index = ~uint64_t{0};
  void Add(uint64_t i) {
    count.fetch_add(1, std::memory_order_relaxed);
    detail::AtomicMin(&first_index, i);
  }
};

// A loop rather than memcpy: rows are short, and an inlined loop beats the
// call.
void CopyFloats(float* __restrict dst, const float* __restrict src, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) dst[i] = src[i];
}

// 1 when slot s holds a row eviction may take (occupied, unpinned), as a
// number: the eviction scans add it instead of branching on every slot,
// whose outcome (about one slot in three occupied) predicts badly.
inline uint64_t EvictableFlag(const DeviceTableRef& ref, uint64_t s) {
  return static_cast<uint64_t>(ref.states[s] == kSlotOccupied) &
         static_cast<uint64_t>(ref.pins[s] == 0);
}

// Moves the first `take` of v[0, n) by `before` to its front, in that
// order: a linear selection, then a sort of those alone.
template <class T, class Before>
void SelectFirst(std::vector<T>& v, uint64_t n, uint64_t take, Before before) {
  if (take == 0) return;
  const auto begin = v.begin();
  if (take < n) std::nth_element(begin, begin + (take - 1), begin + n, before);
  std::sort(begin, begin + take, before);
}

}  // namespace

Status DeviceTable::HostFind(const Key* keys, uint64_t n, float* out, uint32_t out_floats,
                             uint8_t* found) {
  const DeviceTableRef ref = ref_;
  ForEachKey(n, options_.host_threads, [&](uint64_t i) {
    const uint64_t s = ref.Find(keys[i]);
    found[i] = s != kNoSlot;
    if (s != kNoSlot && out != nullptr) CopyFloats(out + i * out_floats, ref.Row(s), out_floats);
  });
  return Status::Ok();
}

Status DeviceTable::HostFindTouch(const TouchBatch& b, uint64_t* missing) {
  const DeviceTableRef ref = ref_;
  std::atomic<uint64_t> misses{0};
  ForEachGroup(b.n, options_.host_threads, ref, b.keys, /*prefetch_floats=*/ref.dim,
               [&](uint64_t i, uint64_t s) {
                 if (b.found != nullptr) b.found[i] = s != kNoSlot;
                 if (s == kNoSlot) {
                   misses.fetch_add(1, std::memory_order_relaxed);
                   return;
                 }
                 const uint64_t row = b.out_rows != nullptr ? b.out_rows[i] : i;
                 CopyFloats(b.out + row * ref.dim, ref.Row(s), ref.dim);
                 detail::StoreRelaxed(&ref.next_use[s],
                                      b.next_use != nullptr ? b.next_use[i] : b.next_use_all);
               });
  *missing = misses.load(std::memory_order_relaxed);
  return Status::Ok();
}

Status DeviceTable::HostFindOrInsert(const Key* keys, uint64_t n, float* values, uint8_t* inserted,
                                     int64_t next_use) {
  const DeviceTableRef ref = ref_;
  const InitializerOptions init = options_.initializer;
  const OptimizerOptions opt = options_.optimizer;
  FailureRecord failed;
  ForEachKey(n, options_.host_threads, [&](uint64_t i) {
    uint64_t s = kNoSlot;
    const ClaimResult r = ref.FindOrInsert(keys[i], init, opt, next_use, &s);
    if (r == ClaimResult::kFull) {
      inserted[i] = kInsertNoRoom;
      failed.Add(i);
      return;
    }
    inserted[i] = r == ClaimResult::kClaimed ? kInsertCreated : kInsertFound;
    if (values != nullptr) CopyFloats(values + i * ref.dim, ref.Row(s), ref.dim);
  });
  const uint64_t count = failed.count.load();
  if (count > 0) return NoRoom("FindOrInsert", count, n, keys[failed.first_index]);
  return Status::Ok();
}

Status DeviceTable::HostInsertOrAssign(const Key* keys, uint64_t n, const float* rows,
                                       const int64_t* next_use, const uint8_t* dirty) {
  const DeviceTableRef ref = ref_;
  uint32_t* owner = owner_.data();
  uint32_t* slot_of = slot_of_.data();
  FailureRecord failed;
  // Pass 1: locate or claim; the last occurrence of a key owns its slot.
  ForEachKey(n, options_.host_threads, [&](uint64_t i) {
    slot_of[i] = ref.ClaimOwner(keys[i], i, owner);
    if (slot_of[i] == kNoSlot32) failed.Add(i);
  });
  // Pass 2: owners write their rows and metadata.
  ForEachKey(n, options_.host_threads, [&](uint64_t i) {
    const uint32_t s = slot_of[i];
    if (!ref.Owns(owner, s, i)) return;
    CopyFloats(ref.Row(s), rows + i * ref.row_floats, ref.row_floats);
    ref.AssignMeta(s, next_use, dirty, i);
  });
  // Pass 3: owners clear the scratch.
  ForEachKey(n, options_.host_threads, [&](uint64_t i) {
    if (ref.Owns(owner, slot_of[i], i)) detail::AtomicStoreRelease(&owner[slot_of[i]], 0);
  });
  const uint64_t count = failed.count.load();
  if (count > 0) return NoRoom("InsertOrAssign", count, n, keys[failed.first_index]);
  return Status::Ok();
}

Status DeviceTable::HostForEachFound(const Key* keys, uint64_t n, int op, const int64_t* next_use,
                                     uint8_t* found) {
  const DeviceTableRef ref = ref_;
  ForEachKey(n, options_.host_threads, [&](uint64_t i) {
    const uint64_t s = ref.Find(keys[i]);
    if (found != nullptr) found[i] = s != kNoSlot;
    if (s != kNoSlot) ref.ApplyOp(op, s, next_use != nullptr ? next_use[i] : 0);
  });
  return Status::Ok();
}

Status DeviceTable::HostFindNonFinite(const float* grads, uint64_t n, uint64_t* rows,
                                      uint64_t* first_index) {
  const uint32_t dim = options_.dim;
  FailureRecord found;
  ForEachKey(n, options_.host_threads, [&](uint64_t i) {
    const float* g = grads + i * dim;
    bool finite = true;
    for (uint32_t d = 0; d < dim; ++d) finite &= std::isfinite(g[d]);
    if (!finite) found.Add(i);
  });
  *rows = found.count.load();
  if (*rows > 0) *first_index = found.first_index;
  return Status::Ok();
}

Status DeviceTable::HostPush(const Key* keys, uint64_t n, const float* grads) {
  const DeviceTableRef ref = ref_;
  uint32_t* slot_of = slot_of_.data();
  uint32_t* count = owner_.data();  // occurrences per slot; zero between calls
  const uint32_t dim = ref.dim;
  const OptimizerOptions opt = options_.optimizer;
  FailureRecord missing;
  // Pass 1: every key's slot, and how often each slot occurs in the batch;
  // the whole row is prefetched for pass 2.
  ForEachGroup(n, options_.host_threads, ref, keys, ref.row_floats, [&](uint64_t i, uint64_t s) {
    slot_of[i] = s == kNoSlot ? kNoSlot32 : static_cast<uint32_t>(s);
    if (slot_of[i] == kNoSlot32) {
      missing.Add(i);
    } else {
      detail::AtomicAdd(&count[slot_of[i]], 1u);
    }
  });
  if (missing.count.load() > 0) {
    ForEachKey(n, options_.host_threads, [&](uint64_t i) {
      if (slot_of[i] != kNoSlot32) detail::StoreRelaxed(&count[slot_of[i]], 0u);
    });
    return NotResident("Push", missing.count.load(), keys[missing.first_index]);
  }
  // Pass 2: a key that occurs once takes its step now; the others are
  // collected, in no particular order yet.
  if (host_repeats_.size() < n)
    host_repeats_.resize(std::max<uint64_t>(n, host_repeats_.size() * 2));
  uint64_t* repeats = host_repeats_.data();
  std::atomic<uint64_t> repeat_count{0};
  ForEachKey(n, options_.host_threads, [&](uint64_t i) {
    const uint32_t s = slot_of[i];
    if (detail::LoadRelaxed(&count[s]) == 1) {
      // Summed from zero like a repeated key's (so -0 reads as +0).
      float sum[kTableDimMax];
      const float* g = grads + i * dim;
      for (uint32_t d = 0; d < dim; ++d) sum[d] = 0.0f + g[d];
      ApplyOptimizer(opt, dim, ref.Row(s), sum);
      ref.dirty[s] = 1;
      detail::StoreRelaxed(&count[s], 0u);
      return;
    }
    repeats[repeat_count.fetch_add(1, std::memory_order_relaxed)] =
        (static_cast<uint64_t>(s) << 32) | i;
  });
  const uint64_t r = repeat_count.load();
  if (r == 0) return Status::Ok();
  // Pass 3: repeated keys, ordered by (slot, batch index): each run is one
  // key whose gradients are summed in batch order, then one step.
  std::sort(repeats, repeats + r);
  float sum[kTableDimMax];
  for (uint64_t j = 0; j < r;) {
    const uint64_t s = repeats[j] >> 32;
    std::fill(sum, sum + dim, 0.0f);
    for (; j < r && (repeats[j] >> 32) == s; ++j) {
      const float* g = grads + (repeats[j] & 0xffffffffULL) * dim;
      for (uint32_t d = 0; d < dim; ++d) sum[d] = sum[d] + g[d];
    }
    ApplyOptimizer(opt, dim, ref.Row(s), sum);
    ref.dirty[s] = 1;
    count[s] = 0;
  }
  return Status::Ok();
}

Status DeviceTable::HostEvict(uint64_t k, RowBatch* out) {
  const DeviceTableRef ref = ref_;
  // Candidates: occupied and unpinned, latest next use first (ties: lower
  // slot first, the order LargestNextUses counts by).
  // Scratch kept at its largest size: the first n entries are this call's.
  std::vector<std::pair<int64_t, uint32_t>>& candidates = host_candidates_;
  const uint64_t slots = ref.slots();
  if (candidates.size() < slots) candidates.resize(slots);
  uint64_t n = 0;
  for (uint64_t s = 0; s < slots; ++s) {  // without a branch per slot
    candidates[n] = {ref.next_use[s], static_cast<uint32_t>(s)};
    n += EvictableFlag(ref, s);
  }
  const uint64_t take = std::min<uint64_t>(k, n);
  auto later = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  SelectFirst(candidates, n, take, later);
  ForEachKey(take, options_.host_threads, [&](uint64_t i) {
    const uint32_t s = candidates[i].second;
    ref.Export(s, *out, i);
    (void)ref.Release(s);
  });
  out->count = take;
  return Status::Ok();
}

Status DeviceTable::HostLargestNextUses(uint64_t k, int64_t* out_host, uint64_t* count) {
  const DeviceTableRef ref = ref_;
  std::vector<int64_t>& values = host_next_uses_;  // the first n entries are this call's
  const uint64_t slots = ref.slots();
  if (values.size() < slots) values.resize(slots);
  uint64_t n = 0;
  for (uint64_t s = 0; s < slots; ++s) {  // without a branch per slot
    values[n] = ref.next_use[s];
    n += EvictableFlag(ref, s);
  }
  const uint64_t take = std::min<uint64_t>(k, n);
  SelectFirst(values, n, take, std::greater<>());
  std::copy(values.begin(), values.begin() + take, out_host);
  *count = take;
  return Status::Ok();
}

Status DeviceTable::HostExportAll(const std::function<Status(const RowBatch&)>& fn) {
  const DeviceTableRef ref = ref_;
  const uint64_t chunk_max = std::max<uint64_t>(1, std::min(options_.batch_keys_max, Size()));
  std::vector<Key> keys(chunk_max);
  std::vector<float> rows(chunk_max * ref.row_floats);
  std::vector<int64_t> next_use(chunk_max);
  std::vector<uint8_t> dirty(chunk_max);
  RowBatch batch{keys.data(), rows.data(), next_use.data(), dirty.data(), 0};
  const uint64_t slots = ref.slots();
  for (uint64_t s = 0; s < slots; ++s) {
    if (!ref.Occupied(s)) continue;
    ref.Export(s, batch, batch.count++);
    if (batch.count == chunk_max) {
      STRATA_RETURN_IF_ERROR(fn(batch));
      batch.count = 0;
    }
  }
  if (batch.count > 0) STRATA_RETURN_IF_ERROR(fn(batch));
  return Status::Ok();
}

}  // namespace strata::kernels
