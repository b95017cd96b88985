#include "examples/train/belady.h"

#include <limits>
#include <set>
#include <utility>

namespace strata::train {

void AccessRecorder::Add(TableId table, std::span<const Key> unique_keys) {
  STRATA_ASSERT(!batch_begin_.empty(), "BeginBatch before Add");
  for (Key key : unique_keys) {
    auto [it, inserted] = id_of_.try_emplace({table, key}, static_cast<uint32_t>(id_of_.size()));
    ids_.push_back(it->second);
  }
}

std::span<const uint32_t> AccessRecorder::Batch(size_t b) const {
  STRATA_ASSERT(b < batch_begin_.size(), "batch index out of range");
  size_t end = b + 1 < batch_begin_.size() ? batch_begin_[b + 1] : ids_.size();
  return std::span<const uint32_t>(ids_).subspan(batch_begin_[b], end - batch_begin_[b]);
}

CacheSimResult SimulateCache(const AccessRecorder& accesses, uint64_t capacity_rows,
                             CachePolicy policy) {
  const size_t rows = accesses.unique_rows();
  const size_t batches = accesses.batches();
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

  // next_use[b][i]: the batch that next uses the i-th id of batch b (kNever if none).
  std::vector<std::vector<int64_t>> next_use(batches);
  if (policy == CachePolicy::kBeladyMin) {
    std::vector<int64_t> upcoming(rows, kNever);
    for (size_t b = batches; b-- > 0;) {
      auto ids = accesses.Batch(b);
      next_use[b].resize(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        next_use[b][i] = upcoming[ids[i]];
        upcoming[ids[i]] = static_cast<int64_t>(b);
      }
    }
  }

  // Eviction takes the smallest (priority, id): MIN ranks by -next_use, LRU by last use.
  std::set<std::pair<int64_t, uint32_t>> evictable;
  std::vector<int64_t> priority(rows, 0);
  std::vector<uint8_t> cached(rows, 0), seen(rows, 0);
  CacheSimResult result;
  for (size_t b = 0; b < batches; ++b) {
    auto ids = accesses.Batch(b);
    for (uint32_t id : ids) {
      ++result.accesses;
      if (cached[id]) {
        evictable.erase({priority[id], id});  // pinned while the batch runs
      } else {
        if (seen[id]) {
          ++result.reads;
        } else {
          ++result.first_touches;
        }
        seen[id] = 1;
        cached[id] = 1;
      }
    }
    while (!evictable.empty() && evictable.size() + ids.size() > capacity_rows) {
      auto victim = evictable.begin();
      cached[victim->second] = 0;
      evictable.erase(victim);
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      const uint32_t id = ids[i];
      priority[id] =
          policy == CachePolicy::kBeladyMin
              ? (next_use[b][i] == kNever ? std::numeric_limits<int64_t>::min() : -next_use[b][i])
              : static_cast<int64_t>(b);
      evictable.insert({priority[id], id});
    }
  }
  return result;
}

}  // namespace strata::train
