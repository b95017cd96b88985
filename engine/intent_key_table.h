// IntentKeyTable: the intent index's records of one table's keys, flat.
//
// A record (16 bytes) holds a key, the last of the index's windows holding
// it (the windows form a ring by start: the last one links to the first) and
// how many of them the planner acted on. Records sit in one array indexed by
// a 32-bit record number that stays fixed while the key is tracked (window
// entries name it); a freed number is reused. An open-addressing array of
// record numbers (4 bytes a slot, linear probing, backward-shift deletion, at
// most 4/5 full) finds a key's record. No allocation per key: the record
// array grows by a quarter, the slot array by doubling, and both are
// released when the last key leaves.
//
// Thread safety: none; owned by the IntentIndex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "strata/types.h"

namespace strata::engine {

class IntentKeyTable {
 public:
  static constexpr uint32_t kNone = ~uint32_t{0};

  // The key's windows: `tail` is the one with the latest start (a window id
  // of the IntentIndex, kNone when the key has none); `acted` counts the
  // acted-on windows. In a free record, tail chains the free list.
  struct Links {
    uint32_t tail = kNone;
    uint32_t acted = 0;
  };

  // The key's record number, or kNone.
  uint32_t Find(Key key) const;
  // The key's record number; a new record (no windows) if it had none.
  uint32_t FindOrAdd(Key key);
  // Frees a record. REQUIRES: `record` is tracked.
  void Erase(uint32_t record);

  Key key(uint32_t record) const { return records_[record].key; }
  Links& links(uint32_t record) { return records_[record].links; }
  const Links& links(uint32_t record) const { return records_[record].links; }
  // Keys tracked.
  size_t size() const { return live_; }
  // Heap bytes of the arrays (capacity).
  size_t MemoryBytes() const;

 private:
  size_t Home(Key key) const;
  // The slot array at `slots` slots, every tracked record placed again.
  void Rehash(size_t slots);

  struct Record {
    Key key;
    Links links;
  };
  static_assert(sizeof(Record) == 16);

  std::vector<Record> records_;  // by record number
  std::vector<uint32_t> slots_;  // record number + 1; 0 = empty; power-of-two size
  uint32_t free_ = kNone;        // first free record number
  size_t live_ = 0;
};

}  // namespace strata::engine
