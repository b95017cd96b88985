// DramShard: construction, Lookup, pins, flags and next uses. Insert,
// eviction and write-back live in dram_cache_insert.cc, the eviction order in
// dram_order.cc.
#include "storage/dram/dram_shard.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <new>
#include <shared_mutex>
#include <thread>
#include <unordered_set>

#include "base/assert.h"
#include "storage/dram/dram_shard_internal.h"
#include "storage/dram/limits.h"

namespace strata::storage {

uint64_t DramBudgetPool::Take(uint64_t want) {
  uint64_t free = free_.load(std::memory_order_relaxed);
  uint64_t got = std::min(want, free);
  while (got > 0 && !free_.compare_exchange_weak(free, free - got, std::memory_order_relaxed)) {
    got = std::min(want, free);
  }
  return got;
}

DramShard::DramShard(const DramCacheOptions& options, RowStore* backing, DramBudgetPool* pool)
    : options_(options),
      backing_(backing),
      evict_mask_(kDramMetaOccupied | kDramMetaCleaning | kDramMetaHold | kDramMetaPinned |
                  (backing == nullptr ? kDramMetaDirty : 0u)),
      evict_occupied_(kDramMetaOccupied),
      pool_(pool),
      front_min_(kDramNoFront) {}

DramShard::~DramShard() = default;

Result<std::unique_ptr<DramShard>> DramShard::Create(const DramCacheOptions& options,
                                                     const std::vector<TableSpec>& tables,
                                                     RowStore* backing, DramBudgetPool* pool,
                                                     uint64_t borrow_max) {
  if (tables.size() > kTablesMax) {
    return Status::InvalidArgument("dram cache: " + std::to_string(tables.size()) +
                                   " tables, at most " + std::to_string(kTablesMax));
  }
  if (options.lock_stripes == 0 || options.lock_stripes > kDramLockStripesMax) {
    return Status::InvalidArgument("dram cache: lock_stripes " +
                                   std::to_string(options.lock_stripes) + " not in [1, " +
                                   std::to_string(kDramLockStripesMax) + "]");
  }
  std::unordered_set<TableId> ids;
  for (const TableSpec& spec : tables) {
    std::string name = "dram cache: table '" + spec.name + "' (id " + std::to_string(spec.id) + ")";
    if (!ids.insert(spec.id).second) return Status::InvalidArgument(name + ": duplicate table id");
    if (spec.row_bytes == 0 || spec.row_bytes > kRowBytesMax) {
      return Status::InvalidArgument(name + ": row_bytes " + std::to_string(spec.row_bytes) +
                                     " not in [1, " + std::to_string(kRowBytesMax) + "]");
    }
    if (spec.row_bytes > options.dram_bytes_max) {
      return Status::InvalidArgument(name + ": row_bytes " + std::to_string(spec.row_bytes) +
                                     " exceeds dram_bytes_max " +
                                     std::to_string(options.dram_bytes_max));
    }
  }
  std::unique_ptr<DramShard> cache(new DramShard(options, backing, pool));
  cache->borrow_max_ = pool == nullptr ? 0 : borrow_max;
  const uint32_t stripes = std::bit_ceil(options.lock_stripes);
  uint32_t row_bytes_min = UINT32_MAX;
  // The leaving bytes every table's arena has spare slots for.
  uint64_t transit_bytes = UINT64_MAX;
  for (const TableSpec& spec : tables) {
    auto t = std::make_unique<Table>();
    t->spec = spec;
    t->pos = static_cast<uint32_t>(cache->tables_.size());
    // Room for the resident budget (this shard's own bytes and all it may
    // borrow) plus the rows in transit (BeginMoveUp).
    const uint64_t budget_slots = (options.dram_bytes_max + cache->borrow_max_) / spec.row_bytes;
    t->slots_max =
        std::min<uint64_t>(budget_slots + std::min(options.transit_rows_max, kDramSlotsPerTableMax),
                           kDramSlotsPerTableMax);
    transit_bytes = std::min(transit_bytes, (t->slots_max - std::min(t->slots_max, budget_slots)) *
                                                uint64_t{spec.row_bytes});
    STRATA_ASSIGN_OR_RETURN(t->rows, DramArena::Create(t->slots_max, DramSlotBytes(spec.row_bytes),
                                                       options.huge_pages));
    STRATA_ASSIGN_OR_RETURN(t->meta_arena,
                            DramArena::Create(t->slots_max, sizeof(uint32_t), options.huge_pages));
    t->index = std::make_unique<DramIndex>(stripes, options.huge_pages);
    {
      base::MutexLock lock(&cache->mu_);  // not shared yet; for the analysis
      cache->slots_.push_back(
          {reinterpret_cast<uint32_t*>(t->meta_arena->base()), 0, kDramNoSlot, {}});
    }
    cache->table_pos_[spec.id] = t->pos;
    cache->tables_.push_back(std::move(t));
    row_bytes_min = std::min(row_bytes_min, spec.row_bytes);
  }
  cache->rows_max_ = tables.empty() ? 0 : options.dram_bytes_max / row_bytes_min;
  cache->transit_bytes_max_ =
      tables.empty() ? 0
                     : std::min(transit_bytes, options.transit_rows_max * uint64_t{row_bytes_min});
  cache->front_rows_max_ =
      std::max<uint64_t>(kDramFrontRowsMin, cache->rows_max_ / kDramFrontRowsDivisor);
  cache->clean_plan_rows_max_ =
      std::max<uint64_t>(kDramCleanPlanRowsMin, cache->rows_max_ / kDramCleanPlanDivisor);
  return cache;
}

Result<DramShard::Table*> DramShard::FindTable(TableId id, std::string_view op) const {
  auto it = table_pos_.find(id);
  if (it == table_pos_.end()) {
    return Status::InvalidArgument("dram cache " + std::string(op) + ": unknown table id " +
                                   std::to_string(id));
  }
  return tables_[it->second].get();
}

Status DramShard::CheckKeySpan(const Table& t, std::string_view op, size_t keys, size_t other,
                               std::string_view what, bool may_be_empty) const {
  if (other == keys || (may_be_empty && other == 0)) return Status::Ok();
  return Status::InvalidArgument("dram cache " + std::string(op) + " of " + t.Name() + ": " +
                                 std::string(what) + " has size " + std::to_string(other) +
                                 ", expected " + std::to_string(keys) +
                                 (may_be_empty ? " or 0" : ""));
}

// Inserts change maps without mu_ (under the stripe locks), so the probe
// takes the stripe's read lock.
uint32_t DramShard::FindSlot(const Table& t, Key key) const {
  const uint64_t hash = DramKeyHash(key);
  bool dirty = false;
  const DramIndex::Stripe& stripe = t.index->stripe(t.index->StripeOf(hash));
  base::ReaderLock lock(&stripe.mu);
  return stripe.map.Find(
      key, hash, [&t](uint32_t slot) { return t.KeyAt(slot); }, &dirty);
}

uint32_t DramShard::AllocateSlot(Table& t) {
  TableSlots& ts = slots_[t.pos];
  if (ts.free_head != kDramNoSlot) {
    const uint32_t slot = ts.free_head;
    ts.free_head = static_cast<uint32_t>(t.KeyAt(slot));  // a free slot's key is the link
    return slot;
  }
  if (slots_[t.pos].touched >= t.slots_max) return kDramNoSlot;
  uint32_t slot = static_cast<uint32_t>(slots_[t.pos].touched++);
  Meta(t.pos, slot) = 0;
  new (t.rows->Slot(slot)) DramSlotHeader();
  return slot;
}

void DramShard::SetDirtyLocked(Table& t, uint32_t slot, bool dirty, bool file) {
  uint32_t& meta = Meta(t.pos, slot);
  if (((meta & kDramMetaDirty) != 0) == dirty) return;
  meta = dirty ? meta | kDramMetaDirty : meta & ~kDramMetaDirty;
  const uint64_t hash = DramKeyHash(t.KeyAt(slot));
  DramIndex::Stripe& stripe = t.index->stripe(t.index->StripeOf(hash));
  {
    base::WriterLock lock(&stripe.mu);
    bool found = stripe.map.SetDirty(hash, slot, dirty);
    STRATA_ASSERT(found, "dram cache: resident row missing from the index");
  }
  if (file) File(t.pos, slot);  // a clean row may have become evictable
}

// ---- Lookup ------------------------------------------------------------------

Result<DramShard::LookupView> DramShard::View(TableId table) const {
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "Lookup"));
  return LookupView{t->index.get(), t->rows->Slot(0), t->rows->slot_bytes(), t->slots_max,
                    t->spec.row_bytes};
}

// ---- Pins, flags, next uses ------------------------------------------------

Status DramShard::Pin(const Table& t, std::span<const Key> keys, std::span<uint8_t> found) {
  base::MutexLock lock(&mu_);
  // A row an Insert holds may be its victim, about to leave.
  while (AnyFlagged(t, keys, kDramMetaHold)) {
    insert_waits_.fetch_add(1, std::memory_order_relaxed);
    state_cv_.Wait(&mu_);
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    uint32_t slot = FindSlot(t, keys[i]);
    found[i] = slot != kDramNoSlot;
    if (slot == kDramNoSlot) continue;
    uint32_t& pins = slots_[t.pos].pins[slot];
    STRATA_ASSERT(pins < UINT32_MAX, "dram cache: pin count overflow");
    ++pins;
    Meta(t.pos, slot) |= kDramMetaPinned;  // a queued entry is skipped while pinned
  }
  return Status::Ok();
}

Status DramShard::SetNextUse(TableId table, std::span<const Key> keys,
                             std::span<const Clock> next_use) {
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "SetNextUse"));
  STRATA_RETURN_IF_ERROR(
      CheckKeySpan(*t, "SetNextUse", keys.size(), next_use.size(), "next_use", false));
  base::MutexLock lock(&mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    uint32_t slot = FindSlot(*t, keys[i]);
    if (slot != kDramNoSlot) SetCode(t->pos, slot, CodeOf(next_use[i]));
  }
  return Status::Ok();
}

// ---- Iteration and stats -----------------------------------------------------

Status DramShard::ForEach(
    TableId table, const std::function<Status(Key, std::span<const std::byte>, bool dirty)>& fn) {
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "ForEach"));
  base::MutexLock lock(&mu_);
  WaitInsertsDone();  // no row is being written meanwhile
  for (uint64_t slot = 0; slot < slots_[t->pos].touched; ++slot) {
    const uint32_t meta = Meta(t->pos, static_cast<uint32_t>(slot));
    if ((meta & kDramMetaOccupied) == 0) continue;
    STRATA_RETURN_IF_ERROR(fn(t->KeyAt(static_cast<uint32_t>(slot)),
                              {t->Row(static_cast<uint32_t>(slot)), t->spec.row_bytes},
                              (meta & kDramMetaDirty) != 0));
  }
  return Status::Ok();
}

DramCacheStats DramShard::Stats() const {
  base::MutexLock lock(&mu_);
  DramCacheStats s;
  s.rows = rows_;
  s.rows_max = rows_max_;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.lookup_retries = lookup_retries_.load(std::memory_order_relaxed);
  s.inserts = inserts_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  s.dirty_writebacks = dirty_writebacks_.load(std::memory_order_relaxed);
  s.writeback_errors = writeback_errors_.load(std::memory_order_relaxed);
  s.cleaned_ahead = cleaned_ahead_.load(std::memory_order_relaxed);
  s.clean_plans = clean_plans_.load(std::memory_order_relaxed);
  s.room_waits = room_waits_.load(std::memory_order_relaxed);
  s.insert_waits = insert_waits_.load(std::memory_order_relaxed);
  s.bytes_used = bytes_used_;
  s.bytes_max = options_.dram_bytes_max;
  // Queue entries; a pinned row's count costs about one hash node.
  s.index_bytes = (front_.capacity() + late_.capacity()) * sizeof(QueueEntry) +
                  clean_plan_bytes_.load(std::memory_order_relaxed);
  constexpr uint64_t kPinNodeBytes = 32;
  for (const auto& t : tables_) {
    const TableSlots& ts = slots_[t->pos];
    const uint64_t header_bytes = DramSlotBytes(t->spec.row_bytes) - t->spec.row_bytes;
    s.index_bytes += t->index->bytes() + ts.touched * (sizeof(uint32_t) + header_bytes) +
                     ts.pins.size() * kPinNodeBytes;
  }
  return s;
}

bool DramShard::numa_interleaved() const {
  for (const auto& t : tables_) {
    if (!t->rows->interleaved()) return false;
  }
  return !tables_.empty();
}

}  // namespace strata::storage
