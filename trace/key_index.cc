// KeyIndex: open addressing over dense ids (key_index.h).
#include "trace/key_index.h"

#include "base/assert.h"
#include "base/hash.h"
#include "trace/limits.h"

namespace strata::trace {

KeyIndex::KeyIndex(uint64_t expected_keys) {
  uint64_t capacity = 16;
  while (capacity < expected_keys * 2) capacity <<= 1;
  slots_.assign(capacity, 0);
  mask_ = capacity - 1;
  keys_.reserve(expected_keys);
  tables_.reserve(expected_keys);
}

uint64_t KeyIndex::Hash(TableId table, Key key) {
  // splitmix64 finalizer over the key mixed with the table.
  return MixSplit64(key ^ (uint64_t{table} * 0x9E3779B97F4A7C15ULL));
}

uint32_t KeyIndex::Find(TableId table, Key key) const {
  for (uint64_t i = Hash(table, key) & mask_;; i = (i + 1) & mask_) {
    const uint32_t slot = slots_[i];
    if (slot == 0) return kNone;
    if (keys_[slot - 1] == key && tables_[slot - 1] == table) return slot - 1;
  }
}

uint32_t KeyIndex::Insert(TableId table, Key key, bool* inserted) {
  if ((size_ + 1) * 2 > slots_.size()) Grow();
  uint64_t i = Hash(table, key) & mask_;
  for (;; i = (i + 1) & mask_) {
    const uint32_t slot = slots_[i];
    if (slot == 0) break;
    if (keys_[slot - 1] == key && tables_[slot - 1] == table) {
      if (inserted != nullptr) *inserted = false;
      return slot - 1;
    }
  }
  STRATA_ASSERT(size_ < kSimulatorKeysMax, "KeyIndex: more than kSimulatorKeysMax keys");
  const uint32_t id = static_cast<uint32_t>(size_++);
  keys_.push_back(key);
  tables_.push_back(table);
  slots_[i] = id + 1;
  if (inserted != nullptr) *inserted = true;
  return id;
}

void KeyIndex::Grow() {
  slots_.assign(slots_.size() * 2, 0);
  mask_ = slots_.size() - 1;
  for (uint32_t id = 0; id < size_; ++id) {
    uint64_t i = Hash(tables_[id], keys_[id]) & mask_;
    while (slots_[i] != 0) i = (i + 1) & mask_;
    slots_[i] = id + 1;
  }
}

}  // namespace strata::trace
