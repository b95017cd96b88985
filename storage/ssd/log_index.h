// LogIndex: the native store's DRAM index of the rows in a table's write log
// (docs/ssd-format.md, "Write log"): key -> log record number, or a
// tombstone for a key deleted since the last merge. Rows not in the log are
// found through the leaf directory (page_directory.h).
//
// Open addressing with linear probing over a fixed array of 12-byte slots,
// sized for the entries the logs may hold (Reset, Rehash): inserts and
// erases never allocate, and the array holds at
// most kSlotsPerEntry x 12 bytes per entry the cycle allows. Slots are placed
// by the high bits of MixKey(key) scaled to the array (no power-of-two
// rounding), so the bytes follow the cycle's budget exactly.
//
// Thread safety: none; the table's lock guards it (shared for Find).
// Ownership: owns its slot array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "strata/types.h"

namespace strata::storage {

class LogIndex {
 public:
  static constexpr uint32_t kTombstone = 0x7FFFFFFEu;  // deleted since the last merge
  static constexpr uint32_t kRecordsMax = kTombstone;  // record numbers are below it
  static constexpr uint32_t kAbsent = 0xFFFFFFFFu;     // Insert: the key was not present
  // Values are below kAbsent; the native store keeps two logs in one index
  // by setting this bit for the second log's records and tombstones.
  static constexpr uint32_t kLogBit = 0x80000000u;
  // Slots per entry the cycle allows: keeps the load factor at most 0.8.
  static constexpr double kSlotsPerEntry = 1.25;

  struct Entry {
    Key key;
    uint32_t value;  // record number, or kTombstone
  };

  // Empties the index and sizes it for `entries_max` inserts of distinct keys.
  void Reset(uint64_t entries_max);
  // Empties the index, keeping its size.
  void Clear();
  // Sets the value of `key`; returns its previous value, or kAbsent.
  // REQUIRES: size() < entries_max() or `key` already present; value < kAbsent.
  uint32_t Insert(Key key, uint32_t value);
  // Removes `key` if its value is `value` (backward-shift deletion, no
  // tombstone slot); returns whether it did.
  bool Erase(Key key, uint32_t value);
  // Re-sizes the index for `entries_max` entries, keeping every entry.
  // REQUIRES: entries_max >= size().
  void Rehash(uint64_t entries_max);
  // The value of `key`, or false when the log does not hold it.
  bool Find(Key key, uint32_t* value) const;

  uint64_t size() const { return size_; }
  uint64_t entries_max() const { return entries_max_; }
  uint64_t MemoryBytes() const { return slot_count_ * sizeof(Slot); }
  // Every entry, in no particular order.
  std::vector<Entry> Entries() const;
  // Calls fn(key, value) for every entry, in no particular order.
  template <class Fn>
  void ForEach(Fn&& fn) const {
    for (uint64_t i = 0; i < slot_count_; ++i) {
      if (slots_[i].value != kEmpty) fn(Key{slots_[i].key}, uint32_t{slots_[i].value});
    }
  }

 private:
  // Packed: 12 bytes. value kEmpty marks a free slot (every key is valid).
  struct __attribute__((packed)) Slot {
    Key key;
    uint32_t value;
  };
  static constexpr uint32_t kEmpty = kAbsent;
  uint64_t Home(Key key) const;

  std::unique_ptr<Slot[]> slots_;
  uint64_t slot_count_ = 0;
  uint64_t entries_max_ = 0;
  uint64_t size_ = 0;
};

}  // namespace strata::storage
