// Cache floors for a recorded access sequence: Belady's MIN and LRU.
//
// AccessRecorder collects, batch by batch, the unique (table, key) pairs the
// trainer touches. SimulateCache replays them against a cache of
// `capacity_rows` rows in which all keys of a batch must be resident together
// (the store pins a batch's rows), under
//  - Belady's MIN: evict the rows whose next use lies farthest in the future
//    (never-used-again first); the fewest misses any cache of that size can
//    have at batch granularity;
//  - LRU: evict the least recently used rows.
// A miss on a key never seen before is a creation, not a read, so it is
// counted apart: `reads` = misses of keys seen before = the SSD reads a store
// with that much memory above the SSD could not avoid.
//
// Thread safety: none; the recorder is filled by one thread and read after.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "strata/assert.h"
#include "strata/types.h"

namespace strata::train {

class AccessRecorder {
 public:
  // Appends one batch: the unique keys of `table` (call once per table).
  void BeginBatch() { batch_begin_.push_back(ids_.size()); }
  void Add(TableId table, std::span<const Key> unique_keys);

  size_t batches() const { return batch_begin_.size(); }
  size_t unique_rows() const { return id_of_.size(); }
  // Dense row ids of batch b (each unique within the batch).
  std::span<const uint32_t> Batch(size_t b) const;

 private:
  struct PairHash {
    size_t operator()(const std::pair<TableId, Key>& p) const {
      return std::hash<Key>()(p.second * 0x9e3779b97f4a7c15ull + p.first);
    }
  };
  std::unordered_map<std::pair<TableId, Key>, uint32_t, PairHash> id_of_;
  std::vector<uint32_t> ids_;
  std::vector<size_t> batch_begin_;
};

struct CacheSimResult {
  uint64_t accesses = 0;       // (table, key) uses, deduplicated per batch
  uint64_t first_touches = 0;  // keys seen for the first time (created, not read)
  uint64_t reads = 0;          // misses of keys seen before
};

enum class CachePolicy { kBeladyMin, kLru };

// REQUIRES: capacity_rows >= the unique keys of every batch.
CacheSimResult SimulateCache(const AccessRecorder& accesses, uint64_t capacity_rows,
                             CachePolicy policy);

}  // namespace strata::train
