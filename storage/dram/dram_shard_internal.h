// Internal state of DramShard shared by its source files: the slot layout,
// the per-slot metadata word and per-table state. Not part of the storage
// API.
//
// Thread safety: a Table is constant after construction; what mutators
// change lives in DramShard::slots_, GUARDED_BY(mu_): a table's TableSlots and,
// through its `meta` pointer, its metadata words, reached with mu_ held only
// (DramShard::Meta). They are not annotated in place because clang's analysis
// cannot name the enclosing DramShard's mu_ from a nested struct (it has no
// `this` of its parent). A slot's key is written before the slot is published
// in the index; lookups read keys and rows optimistically (dram_lookup.h), so
// a published row changes only under its stripe's lock held exclusively,
// and a slot is reused only after its entry left the index. Ownership: a
// Table owns its arenas and index.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "storage/dram/dram_arena.h"
#include "storage/dram/dram_index.h"
#include "storage/dram/dram_shard.h"
#include "storage/dram/limits.h"

namespace strata::storage {

// The first 8 bytes of every arena slot, before the row: the row's key, in
// the row's own first cache line, so a hit costs one bucket miss and the
// row's lines, nothing else. In a released slot: the next free slot.
struct DramSlotHeader {
  Key key;
};
static_assert(sizeof(DramSlotHeader) == 8);
inline constexpr uint32_t kDramSlotHeaderBytes = sizeof(DramSlotHeader);

// Slot stride: header + row, rounded up to 8 bytes.
inline uint32_t DramSlotBytes(uint32_t row_bytes) {
  return (kDramSlotHeaderBytes + row_bytes + 7) / 8 * 8;
}

// The metadata word of a slot (uint32, mutators only): flags in the low
// bits, the eviction code above them.
inline constexpr uint32_t kDramMetaOccupied = 1u << 0;
inline constexpr uint32_t kDramMetaDirty = 1u << 1;     // also in the index entry
inline constexpr uint32_t kDramMetaCleaning = 1u << 2;  // CleanAhead is writing a copy
inline constexpr uint32_t kDramMetaHold = 1u << 3;      // an Insert is overwriting it
inline constexpr uint32_t kDramMetaQueued = 1u << 4;    // has a live entry in a queue
inline constexpr uint32_t kDramMetaPinned = 1u << 5;    // TableSlots::pins counts it
inline constexpr uint32_t kDramMetaCodeShift = 6;
inline uint32_t DramMetaCode(uint32_t meta) { return meta >> kDramMetaCodeShift; }

// What mutators change about a table's slots: DramShard::slots_ holds one per
// table (by position), GUARDED_BY(mu_).
struct DramShard::TableSlots {
  uint32_t* meta = nullptr;                     // the table's meta_arena, written up to `touched`
  uint64_t touched = 0;                         // slots ever allocated (bump pointer)
  uint32_t free_head = kDramNoSlot;             // released slots, linked through their key fields
  std::unordered_map<uint32_t, uint32_t> pins;  // slot -> pin count, pinned rows only
};

struct DramShard::Table {
  // Constant after construction.
  TableSpec spec;
  uint32_t pos = 0;                       // position in DramShard::tables_
  uint64_t slots_max = 0;                 // dram_bytes_max / row_bytes + transit_rows_max, capped
  std::unique_ptr<DramArena> rows;        // slots of DramSlotBytes(row_bytes)
  std::unique_ptr<DramArena> meta_arena;  // metadata words, reached through DramShard::Meta
  std::unique_ptr<DramIndex> index;

  DramSlotHeader& Header(uint32_t slot) const {
    return *reinterpret_cast<DramSlotHeader*>(rows->Slot(slot));
  }
  Key KeyAt(uint32_t slot) const { return Header(slot).key; }
  std::byte* Row(uint32_t slot) const { return rows->Slot(slot) + kDramSlotHeaderBytes; }
  std::string Name() const {
    return "table '" + spec.name + "' (id " + std::to_string(spec.id) + ")";
  }
};

inline uint32_t& DramShard::Meta(uint32_t table, uint32_t slot) const {
  return slots_[table].meta[slot];
}

inline void DramShard::File(uint32_t table, uint32_t slot) {
  const uint32_t meta = Meta(table, slot);
  if ((meta & kDramMetaQueued) != 0 || !Evictable(meta)) return;
  // At most front_min_ (or no sweep in force): the next sweep finds it.
  if (front_min_ == kDramNoFront || DramMetaCode(meta) <= front_min_) return;
  FileLate(table, slot);
}

inline void DramShard::SetCode(uint32_t table, uint32_t slot, uint32_t code) {
  uint32_t& meta = Meta(table, slot);
  if (DramMetaCode(meta) != code) {
    meta = (meta & ((1u << kDramMetaCodeShift) - 1) & ~kDramMetaQueued) | code
                                                                              << kDramMetaCodeShift;
  }
  File(table, slot);
}

}  // namespace strata::storage
