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
#include <string>
#include <vector>

#include "storage/dram_arena.h"
#include "storage/dram_cache.h"
#include "storage/dram_index.h"

namespace strata::storage {

// One per slot, constructed when the slot is first allocated. 48 bytes.
struct DramCache::SlotMeta {
  Key key = 0;                       // written under mu_ before publication
  Clock next_use = kClockNever;      // guarded by mu_
  std::atomic<uint64_t> tick{0};     // last use; Lookup stores, relaxed
  std::atomic<uint32_t> freq{0};     // uses; Lookup adds in kLfu mode, relaxed
  uint32_t pins = 0;                 // guarded by mu_
  uint64_t tick_in_order = 0;        // guarded by mu_: tick of the order_ entry
  uint32_t freq_in_order = 0;        // guarded by mu_: freq of the order_ entry
  std::atomic<uint8_t> dirty{0};     // written under mu_ (and the stripe lock)
  uint8_t occupied = 0;              // guarded by mu_
  uint8_t in_order = 0;              // guarded by mu_: has an order_ entry
};

struct DramCache::Table {
  // Constant after construction.
  TableSpec spec;
  uint32_t pos = 0;         // position in DramCache::tables_
  uint64_t slots_max = 0;   // dram_bytes_max / row_bytes, capped
  std::unique_ptr<DramArena> rows;
  std::unique_ptr<DramArena> meta_arena;
  SlotMeta* meta = nullptr;  // meta_arena's slots, constructed up to slots_touched
  std::unique_ptr<DramIndex> index;

  // Guarded by DramCache::mu_.
  uint64_t slots_touched = 0;        // slots ever allocated (bump pointer)
  std::vector<uint32_t> free_slots;  // released slots, reused last-in first-out
  uint64_t resident = 0;             // rows resident

  std::string Name() const {
    return "table '" + spec.name + "' (id " + std::to_string(spec.id) + ")";
  }
};

}  // namespace strata::storage
