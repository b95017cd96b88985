// KeyIndex: a dense numbering of the distinct (table, key) pairs of a trace,
// for the statistics and the cache simulator. Open addressing with linear
// probing; 16 bytes per slot at a load of at most one half, so far smaller
// than a std::unordered_map of the same keys.
//
// Thread safety: Insert needs exclusive access; Find may run concurrently
// with other Finds.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/types.h"

namespace strata::trace {

class KeyIndex {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  explicit KeyIndex(uint64_t expected_keys = 1024);

  // The id of (table, key), numbered from 0 in first-insertion order;
  // `*inserted` tells whether it is new. REQUIRES: size() < kSimulatorKeysMax.
  uint32_t Insert(TableId table, Key key, bool* inserted = nullptr);
  // The id of (table, key) or kNone.
  uint32_t Find(TableId table, Key key) const;

  uint64_t size() const { return size_; }
  // The pair an id names. REQUIRES: id < size().
  TableId TableOf(uint32_t id) const { return tables_[id]; }
  Key KeyOf(uint32_t id) const { return keys_[id]; }

 private:
  static uint64_t Hash(TableId table, Key key);
  void Grow();

  std::vector<uint32_t> slots_;  // id + 1, or 0 when empty
  std::vector<Key> keys_;        // by id
  std::vector<TableId> tables_;  // by id
  uint64_t mask_ = 0;
  uint64_t size_ = 0;
};

}  // namespace strata::trace
