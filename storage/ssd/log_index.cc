#include "storage/ssd/log_index.h"

#include "base/assert.h"
#include "storage/ssd/ssd_format.h"

namespace strata::storage {

void LogIndex::Reset(uint64_t entries_max) {
  entries_max_ = entries_max;
  slot_count_ = static_cast<uint64_t>(double(entries_max) * kSlotsPerEntry) + 1;
  slots_ = std::make_unique<Slot[]>(slot_count_);
  Clear();
}

void LogIndex::Clear() {
  for (uint64_t i = 0; i < slot_count_; ++i) slots_[i] = Slot{0, kEmpty};
  size_ = 0;
}

uint64_t LogIndex::Home(Key key) const {
  // Multiply-shift onto [0, slot_count_): uniform for the mixed key.
  return static_cast<uint64_t>((unsigned __int128)ssd::MixKey(key) * slot_count_ >> 64);
}

uint32_t LogIndex::Insert(Key key, uint32_t value) {
  STRATA_ASSERT(value != kEmpty, "log index value out of range");
  for (uint64_t i = Home(key);; i = i + 1 == slot_count_ ? 0 : i + 1) {
    Slot& s = slots_[i];
    if (s.value == kEmpty) {
      STRATA_ASSERT(size_ < entries_max_, "log index full");
      s = Slot{key, value};
      ++size_;
      return kAbsent;
    }
    if (s.key == key) {
      const uint32_t previous = s.value;
      s.value = value;
      return previous;
    }
  }
}

bool LogIndex::Erase(Key key, uint32_t value) {
  if (size_ == 0) return false;
  auto next = [&](uint64_t i) { return i + 1 == slot_count_ ? 0 : i + 1; };
  uint64_t hole = Home(key);
  for (;; hole = next(hole)) {
    if (slots_[hole].value == kEmpty) return false;
    if (slots_[hole].key == key) break;
  }
  if (slots_[hole].value != value) return false;
  // Shift later entries of the run back into the hole, unless their home
  // lies cyclically in (hole, j]: then they are already as close as they may be.
  for (uint64_t j = next(hole); slots_[j].value != kEmpty; j = next(j)) {
    const uint64_t home = Home(slots_[j].key);
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot{0, kEmpty};
  --size_;
  return true;
}

void LogIndex::Rehash(uint64_t entries_max) {
  STRATA_ASSERT(entries_max >= size_, "log index rehashed below its size");
  LogIndex bigger;
  bigger.Reset(entries_max);
  ForEach([&](Key key, uint32_t value) { bigger.Insert(key, value); });
  *this = std::move(bigger);
}

bool LogIndex::Find(Key key, uint32_t* value) const {
  if (size_ == 0) return false;
  for (uint64_t i = Home(key);; i = i + 1 == slot_count_ ? 0 : i + 1) {
    const Slot& s = slots_[i];
    if (s.value == kEmpty) return false;
    if (s.key == key) {
      *value = s.value;
      return true;
    }
  }
}

std::vector<LogIndex::Entry> LogIndex::Entries() const {
  std::vector<Entry> out;
  out.reserve(size_);
  ForEach([&](Key key, uint32_t value) { out.push_back({key, value}); });
  return out;
}

}  // namespace strata::storage
