// Internal state of DramCache shared by its source files: per-slot metadata
// and per-table state. Not part of the storage API.
//
// Thread safety: fields are guarded as marked; `tick`, `freq` and `dirty`
// are atomics because Lookup reads or bumps them under a stripe read lock
// only. Ownership: a Table owns its arenas and index.
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
// slot is first allocated. 32 bytes.
struct DramCache::SlotMeta {
  Key key = 0;                   // written under mu_ before publication
  Clock next_use = kClockNever;  // guarded by mu_
  // guarded by mu_: this row's order_ entry when in_order (its tick and
  // uses are those the header had when it was filed).
  std::set<OrderEntry>::iterator order_pos{};
  uint32_t pins = 0;             // guarded by mu_
  uint8_t occupied = 0;          // guarded by mu_
  uint8_t in_order = 0;          // guarded by mu_: has an order_ entry
  uint8_t cleaning = 0;          // guarded by mu_: CleanAhead is writing a copy
};

struct DramCache::Table {
  // Constant after construction.
  TableSpec spec;
  uint32_t pos = 0;         // position in DramCache::tables_
  uint64_t slots_max = 0;   // dram_bytes_max / row_bytes, capped
  std::unique_ptr<DramArena> rows;  // slots of DramSlotBytes(row_bytes)
  std::unique_ptr<DramArena> meta_arena;
  SlotMeta* meta = nullptr;  // meta_arena's slots, constructed up to slots_touched
  std::unique_ptr<DramIndex> index;

  // Guarded by DramCache::mu_.
  uint64_t slots_touched = 0;        // slots ever allocated (bump pointer)
  std::vector<uint32_t> free_slots;  // released slots, reused last-in first-out
  uint64_t resident = 0;             // rows resident

  DramSlotHeader& Header(uint32_t slot) const {
    return *reinterpret_cast<DramSlotHeader*>(rows->Slot(slot));
  }
  std::byte* Row(uint32_t slot) const { return rows->Slot(slot) + kDramSlotHeaderBytes; }

  std::string Name() const {
    return "table '" + spec.name + "' (id " + std::to_string(spec.id) + ")";
  }
};

}  // namespace strata::storage
