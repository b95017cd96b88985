#include "engine/intent_key_table.h"

#include "base/assert.h"
#include "base/hash.h"

namespace strata::engine {
namespace {

// Slots of a fresh array; the array is kept at most kLoadNum/kLoadDen full.
constexpr size_t kSlotsMin = 16;
constexpr size_t kLoadNum = 4;
constexpr size_t kLoadDen = 5;

}  // namespace

// splitmix64's finalizer: every bit of the key moves the slot.
size_t IntentKeyTable::Home(Key key) const { return MixSplit64(key) & (slots_.size() - 1); }

uint32_t IntentKeyTable::Find(Key key) const {
  if (slots_.empty()) return kNone;
  const size_t mask = slots_.size() - 1;
  for (size_t i = Home(key);; i = (i + 1) & mask) {
    const uint32_t s = slots_[i];
    if (s == 0) return kNone;
    if (records_[s - 1].key == key) return s - 1;
  }
}

uint32_t IntentKeyTable::FindOrAdd(Key key) {
  if ((live_ + 1) * kLoadDen > slots_.size() * kLoadNum) {
    Rehash(slots_.empty() ? kSlotsMin : slots_.size() * 2);
  }
  const size_t mask = slots_.size() - 1;
  size_t i = Home(key);
  for (; slots_[i] != 0; i = (i + 1) & mask) {
    if (records_[slots_[i] - 1].key == key) return slots_[i] - 1;
  }
  uint32_t record = free_;
  if (record != kNone) {
    free_ = records_[record].links.tail;
    records_[record] = {key, Links{}};
  } else {
    STRATA_ASSERT(records_.size() < kNone - 1, "IntentKeyTable: record numbers exhausted");
    record = static_cast<uint32_t>(records_.size());
    if (records_.size() == records_.capacity()) {  // a quarter more, not double
      records_.reserve(records_.capacity() + records_.capacity() / 4 + kSlotsMin);
    }
    records_.push_back({key, Links{}});
  }
  slots_[i] = record + 1;
  ++live_;
  return record;
}

void IntentKeyTable::Erase(uint32_t record) {
  const size_t mask = slots_.size() - 1;
  size_t i = Home(records_[record].key);
  while (slots_[i] != record + 1) {
    STRATA_ASSERT(slots_[i] != 0, "IntentKeyTable::Erase: record not tracked");
    i = (i + 1) & mask;
  }
  // Backward shift: move up every later slot of the run whose home is not
  // between the hole and itself, so no probe meets an early empty slot.
  for (size_t j = (i + 1) & mask; slots_[j] != 0; j = (j + 1) & mask) {
    const size_t home = Home(records_[slots_[j] - 1].key);
    const bool stays = i < j ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    slots_[i] = slots_[j];
    i = j;
  }
  slots_[i] = 0;
  records_[record].links.tail = free_;
  free_ = record;
  if (--live_ == 0) {                      // nothing names a record now: give the arrays back
    std::vector<Record>().swap(records_);  // (`= {}` would keep the capacity)
    std::vector<uint32_t>().swap(slots_);
    free_ = kNone;
  }
}

void IntentKeyTable::Rehash(size_t slots) {
  std::vector<uint32_t> old;
  old.swap(slots_);
  slots_.assign(slots, 0);
  const size_t mask = slots - 1;
  for (uint32_t s : old) {
    if (s == 0) continue;
    size_t i = Home(records_[s - 1].key);
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

size_t IntentKeyTable::MemoryBytes() const {
  return records_.capacity() * sizeof(Record) + slots_.capacity() * sizeof(uint32_t);
}

}  // namespace strata::engine
