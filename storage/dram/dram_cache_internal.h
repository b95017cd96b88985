// Internal state of DramCache shared by its source files: per-slot metadata
// and per-table state. Not part of the storage API.
//
// Thread safety: a Table is constant after construction; what mutators
// change lives in DramCache::slots_, GUARDED_BY(mu_): a table's TableSlots and,
// through its `meta` pointer, its SlotMetas, reached with mu_ held only
// (DramCache::Meta). They are not annotated in place because clang's analysis
// cannot name the enclosing DramCache's mu_ from a nested struct (it has no
// `this` of its parent). `tick`, `freq` and `dirty` are atomics because
// Lookup reads or bumps them under a stripe read lock only. Ownership: a
// Table owns its arenas and index.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "storage/dram/dram_arena.h"
#include "storage/dram/dram_cache.h"
#include "storage/dram/dram_index.h"

namespace strata::storage {

// The first 16 bytes of every arena slot, before the row: what Lookup
// touches besides the row lives in the row's own first cache line, so a hit
// costs one bucket miss and the row's lines, nothing else.
struct DramSlotHeader {
  std::atomic<uint64_t> tick{0};  // last use; Lookup stores, relaxed
  std::atomic<uint32_t> freq{0};  // uses; Lookup adds in kLfu mode, relaxed
  std::atomic<uint8_t> dirty{0};  // written under mu_ (and the stripe lock)
};
static_assert(sizeof(DramSlotHeader) == 16);
inline constexpr uint32_t kDramSlotHeaderBytes = sizeof(DramSlotHeader);

// Slot stride: header + row, rounded up to 16 bytes.
inline uint32_t DramSlotBytes(uint32_t row_bytes) {
  return (kDramSlotHeaderBytes + row_bytes + 15) / 16 * 16;
}

// Mutator-only state of a slot (Lookup never reads it), constructed when the
// slot is first allocated; reached through DramCache::Meta, with mu_ held.
// 32 bytes.
struct DramCache::SlotMeta {
  Key key = 0;  // written before publication in the index
  Clock next_use = kClockNever;
  // This row's order_ entry when in_order (its tick and uses are those the
  // header had when it was filed).
  std::set<OrderEntry>::iterator order_pos{};
  uint32_t pins = 0;
  uint8_t occupied = 0;
  uint8_t in_order = 0;  // has an order_ entry
  uint8_t cleaning = 0;  // CleanAhead is writing a copy
};

// What mutators change about a table's slots: DramCache::slots_ holds one per
// table (by position), GUARDED_BY(mu_).
struct DramCache::TableSlots {
  SlotMeta* meta = nullptr;    // the table's meta_arena, constructed up to `touched`
  uint64_t touched = 0;        // slots ever allocated (bump pointer)
  std::vector<uint32_t> free;  // released slots, reused last-in first-out
};

struct DramCache::Table {
  // Constant after construction.
  TableSpec spec;
  uint32_t pos = 0;                       // position in DramCache::tables_
  uint64_t slots_max = 0;                 // dram_bytes_max / row_bytes, capped
  std::unique_ptr<DramArena> rows;        // slots of DramSlotBytes(row_bytes)
  std::unique_ptr<DramArena> meta_arena;  // SlotMetas, reached through DramCache::Meta
  std::unique_ptr<DramIndex> index;

  DramSlotHeader& Header(uint32_t slot) const {
    return *reinterpret_cast<DramSlotHeader*>(rows->Slot(slot));
  }
  std::byte* Row(uint32_t slot) const { return rows->Slot(slot) + kDramSlotHeaderBytes; }

  std::string Name() const {
    return "table '" + spec.name + "' (id " + std::to_string(spec.id) + ")";
  }
};

inline DramCache::SlotMeta& DramCache::Meta(uint32_t table, uint32_t slot) const {
  return slots_[table].meta[slot];
}

}  // namespace strata::storage
