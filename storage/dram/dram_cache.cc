// DramCache: the keys split over the shards (dram_shard.h), each call's
// part handed to each shard in turn.
#include "storage/dram/dram_cache.h"

#include <algorithm>
#include <bit>
#include <string>

#include "base/assert.h"
#include "storage/dram/dram_index.h"
#include "storage/dram/dram_lookup.h"
#include "storage/dram/dram_shard.h"
#include "storage/dram/limits.h"

namespace strata::storage {

struct DramCache::LookupViews {
  std::unordered_map<TableId, std::vector<DramShard::LookupView>> of;
};

DramCache::DramCache(const DramCacheOptions& options, std::unique_ptr<DramBudgetPool> pool,
                     std::vector<std::unique_ptr<DramShard>> shards)
    : options_(options),
      pool_(std::move(pool)),
      shards_(std::move(shards)),
      lookup_views_(std::make_unique<LookupViews>()) {}

DramCache::~DramCache() = default;

Result<std::unique_ptr<DramCache>> DramCache::Create(const DramCacheOptions& options,
                                                     const std::vector<TableSpec>& tables,
                                                     RowStore* backing) {
  if (options.shards > kDramShardsMax || !std::has_single_bit(std::max(options.shards, 1u))) {
    return Status::InvalidArgument("dram cache: shards " + std::to_string(options.shards) +
                                   " is neither 0 (automatic) nor a power of two in [1, " +
                                   std::to_string(kDramShardsMax) + "]");
  }
  if (options.lock_stripes == 0 || options.lock_stripes > kDramLockStripesMax) {
    return Status::InvalidArgument("dram cache: lock_stripes " +
                                   std::to_string(options.lock_stripes) + " not in [1, " +
                                   std::to_string(kDramLockStripesMax) + "]");
  }
  uint32_t shards = options.shards;
  if (shards == 0) {
    uint64_t row_bytes_min = UINT64_MAX;
    for (const TableSpec& spec : tables) {
      row_bytes_min = std::min<uint64_t>(row_bytes_min, std::max<uint32_t>(spec.row_bytes, 1));
    }
    const uint64_t rows = tables.empty() ? 0 : options.dram_bytes_max / row_bytes_min;
    shards = 1;
    while (shards * 2 <= kDramShardsAuto && rows / (shards * 2) >= kDramShardRowsMin) shards *= 2;
  }
  // Each shard owns (1 - 1/kDramShardPoolDivisor) of its share of the
  // budget; the rest, and what the division leaves, is the pool they borrow
  // from as the hash fills them unevenly.
  const uint64_t share = options.dram_bytes_max / shards;
  const uint64_t own = shards == 1 ? share : share - share / kDramShardPoolDivisor;
  if (shards > 1) {
    for (const TableSpec& spec : tables) {
      if (spec.row_bytes > own) {
        return Status::InvalidArgument(
            "dram cache: table '" + spec.name + "' (id " + std::to_string(spec.id) +
            "): row_bytes " + std::to_string(spec.row_bytes) + " exceeds the " +
            std::to_string(own) + " bytes a shard owns of dram_bytes_max (" +
            std::to_string(options.dram_bytes_max) + " over " + std::to_string(shards) +
            " shards)");
      }
    }
  }
  auto pool = shards == 1 ? nullptr
                          : std::make_unique<DramBudgetPool>(options.dram_bytes_max - own * shards);
  // What one shard may borrow: the pool, at most one more share (so the
  // arenas reserve at most about twice the budget's address space), and no
  // more rows of any table than its slots address.
  uint64_t borrow_max = pool == nullptr ? 0 : std::min(pool->bytes(), share);
  for (const TableSpec& spec : tables) {
    const uint64_t slot_bytes_max = kDramSlotsPerTableMax * uint64_t{spec.row_bytes};
    borrow_max = std::min(borrow_max, slot_bytes_max - std::min(slot_bytes_max, own));
  }
  DramCacheOptions part = options;
  part.shards = 1;
  part.dram_bytes_max = own;
  part.lock_stripes = std::max<uint32_t>(1, std::bit_ceil(options.lock_stripes) / shards);
  std::vector<std::unique_ptr<DramShard>> made;
  for (uint32_t s = 0; s < shards; ++s) {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DramShard> shard,
                            DramShard::Create(part, tables, backing, pool.get(), borrow_max));
    made.push_back(std::move(shard));
  }
  std::unique_ptr<DramCache> cache(new DramCache(options, std::move(pool), std::move(made)));
  uint64_t row_bytes_min = 0;
  for (const TableSpec& spec : tables) {
    cache->specs_[spec.id] = spec;
    std::vector<DramShard::LookupView>& views = cache->lookup_views_->of[spec.id];
    for (const auto& shard : cache->shards_) {
      STRATA_ASSIGN_OR_RETURN(DramShard::LookupView view, shard->View(spec.id));
      views.push_back(view);
    }
    row_bytes_min =
        row_bytes_min == 0 ? spec.row_bytes : std::min(row_bytes_min, uint64_t{spec.row_bytes});
  }
  cache->rows_max_ = row_bytes_min == 0 ? 0 : options.dram_bytes_max / row_bytes_min;
  return cache;
}

Result<const TableSpec*> DramCache::FindTable(TableId table, std::string_view op) const {
  auto it = specs_.find(table);
  if (it == specs_.end()) {
    return Status::InvalidArgument("dram cache " + std::string(op) + ": unknown table id " +
                                   std::to_string(table));
  }
  return &it->second;
}

Status DramCache::CheckSpan(const TableSpec& spec, std::string_view op, size_t want, size_t got,
                            std::string_view what, bool may_be_empty) const {
  if (got == want || (may_be_empty && got == 0)) return Status::Ok();
  return Status::InvalidArgument("dram cache " + std::string(op) + " of table '" + spec.name +
                                 "' (id " + std::to_string(spec.id) + "): " + std::string(what) +
                                 " has size " + std::to_string(got) + ", expected " +
                                 std::to_string(want) + (may_be_empty ? " or 0" : ""));
}

void DramCache::Split(std::span<const Key> keys, Parts& parts) const {
  const uint32_t k = shards();
  const size_t n = keys.size();
  // Each key's shard, hashed once; plain pointers in the loops (see Lookup).
  thread_local std::vector<uint8_t> shard_of_tl;
  thread_local std::vector<uint32_t> cursor_tl;
  std::vector<uint8_t>& shard_of = shard_of_tl;
  std::vector<uint32_t>& cursor = cursor_tl;
  static_assert(kDramShardsMax <= 256);
  shard_of.resize(n);
  parts.bounds.assign(k + 1, 0);
  parts.order.resize(n);
  parts.hashes.resize(n);
  uint8_t* const shard_at = shard_of.data();
  uint32_t* const bound_at = parts.bounds.data();
  uint32_t* const order_at = parts.order.data();
  uint64_t* const hash_at = parts.hashes.data();
  for (size_t i = 0; i < n; ++i) {
    hash_at[i] = DramKeyHash(keys[i]);
    shard_at[i] = static_cast<uint8_t>(ShardOf(hash_at[i]));
    ++bound_at[shard_at[i] + 1];
  }
  for (uint32_t s = 0; s < k; ++s) bound_at[s + 1] += bound_at[s];
  cursor.assign(parts.bounds.begin(), parts.bounds.end() - 1);
  uint32_t* const cursor_at = cursor.data();
  for (size_t i = 0; i < n; ++i) order_at[cursor_at[shard_at[i]]++] = static_cast<uint32_t>(i);
}

uint32_t DramCache::FirstShard(const Parts& parts) const {
  // Each thread starts at a shard its batch picks, so inserting threads
  // spread over the shards rather than queue at the first.
  return parts.hashes.empty() ? 0 : ShardOf(parts.hashes[0]);
}

void DramCache::KeysOf(std::span<const Key> keys, std::span<const uint32_t> positions,
                       std::vector<Key>* out) {
  out->clear();
  for (uint32_t i : positions) out->push_back(keys[i]);
}

Status DramCache::CheckRows(const TableSpec& spec, std::string_view op, size_t keys,
                            std::span<const std::byte> rows, std::span<const uint8_t> dirty,
                            std::span<const Clock> next_use) const {
  STRATA_RETURN_IF_ERROR(
      CheckSpan(spec, op, keys * spec.row_bytes, rows.size(), "rows (bytes)", false));
  STRATA_RETURN_IF_ERROR(CheckSpan(spec, op, keys, dirty.size(), "dirty", true));
  return CheckSpan(spec, op, keys, next_use.size(), "next_use", true);
}

Status DramCache::Lookup(TableId table, std::span<const Key> keys, std::span<std::byte> rows,
                         std::span<uint8_t> found, std::span<uint8_t> dirty) {
  STRATA_ASSIGN_OR_RETURN(const TableSpec* spec, FindTable(table, "Lookup"));
  const size_t n = keys.size();
  STRATA_RETURN_IF_ERROR(
      CheckSpan(*spec, "Lookup", n * spec->row_bytes, rows.size(), "rows (bytes)", false));
  STRATA_RETURN_IF_ERROR(CheckSpan(*spec, "Lookup", n, found.size(), "found", false));
  STRATA_RETURN_IF_ERROR(CheckSpan(*spec, "Lookup", n, dirty.size(), "dirty", true));
  if (n == 0) return Status::Ok();
  // One pipeline over every shard, in the caller's order (dram_lookup.h),
  // through the views Create took. The counts are per thread.
  thread_local std::vector<DramLookupCounts> counts_tl;
  std::vector<DramLookupCounts>& counts = counts_tl;
  counts.assign(shards(), DramLookupCounts{});
  DramLookup(lookup_views_->of.at(table), keys, rows, found, dirty, counts);
  for (uint32_t s = 0; s < shards(); ++s) shards_[s]->CountLookups(counts[s]);
  return Status::Ok();
}

Status DramCache::Insert(TableId table, std::span<const Key> keys, std::span<const std::byte> rows,
                         std::span<const uint8_t> dirty, std::span<const Clock> next_use) {
  if (shards() == 1) return shards_[0]->Insert(table, keys, rows, dirty, next_use);
  // The spans are checked before any shard takes a row: a bad one changes
  // nothing anywhere.
  STRATA_ASSIGN_OR_RETURN(const TableSpec* spec, FindTable(table, "Insert"));
  STRATA_RETURN_IF_ERROR(CheckRows(*spec, "Insert", keys.size(), rows, dirty, next_use));
  thread_local Parts parts_tl;
  Parts& parts = parts_tl;
  Split(keys, parts);
  const uint32_t k = shards();
  for (uint32_t i = 0, first = FirstShard(parts); i < k; ++i) {
    const uint32_t s = (first + i) & (k - 1);
    if (parts.of(s).empty()) continue;
    STRATA_RETURN_IF_ERROR(
        shards_[s]->Insert(table, keys, rows, dirty, next_use, parts.of(s), parts.hashes));
  }
  return Status::Ok();
}

Status DramCache::InsertInPieces(TableId table, std::span<const Key> keys,
                                 std::span<const std::byte> rows, std::span<const uint8_t> dirty,
                                 std::span<const Clock> next_use, std::span<uint8_t> placed) {
  STRATA_ASSIGN_OR_RETURN(const TableSpec* spec, FindTable(table, "InsertInPieces"));
  STRATA_RETURN_IF_ERROR(
      CheckSpan(*spec, "InsertInPieces", keys.size(), placed.size(), "placed", false));
  std::fill(placed.begin(), placed.end(), uint8_t{0});
  STRATA_RETURN_IF_ERROR(CheckRows(*spec, "InsertInPieces", keys.size(), rows, dirty, next_use));
  if (shards() == 1) {
    uint64_t count = 0;
    Status s = shards_[0]->InsertInPieces(table, keys, rows, dirty, next_use, {}, {}, &count);
    std::fill(placed.begin(), placed.begin() + static_cast<ptrdiff_t>(count), uint8_t{1});
    return s;
  }
  Parts parts;
  Split(keys, parts);
  const uint32_t k = shards();
  for (uint32_t i = 0, first = FirstShard(parts); i < k; ++i) {
    const uint32_t s = (first + i) & (k - 1);
    const std::span<const uint32_t> mine = parts.of(s);
    if (mine.empty()) continue;
    uint64_t count = 0;
    Status st =
        shards_[s]->InsertInPieces(table, keys, rows, dirty, next_use, mine, parts.hashes, &count);
    for (uint64_t j = 0; j < count; ++j) placed[mine[j]] = 1;
    STRATA_RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

Status DramCache::Erase(TableId table, std::span<const Key> keys) {
  if (shards() == 1) return shards_[0]->Erase(table, keys);
  STRATA_RETURN_IF_ERROR(FindTable(table, "Erase").status());
  Parts parts;
  Split(keys, parts);
  std::vector<Key> mine;
  for (uint32_t s = 0; s < shards(); ++s) {
    KeysOf(keys, parts.of(s), &mine);
    if (!mine.empty()) STRATA_RETURN_IF_ERROR(shards_[s]->Erase(table, mine));
  }
  return Status::Ok();
}

Status DramCache::BeginMoveUp(TableId table, std::span<const Key> keys, MoveUp* move) {
  STRATA_RETURN_IF_ERROR(FindTable(table, "BeginMoveUp").status());
  move->pinned.assign(keys.size(), 0);
  move->bytes = 0;
  move->shard_bytes.assign(shards(), 0);
  DramShard::MoveUp part;
  if (shards() == 1) {
    STRATA_RETURN_IF_ERROR(shards_[0]->BeginMoveUp(table, keys, &part));
    move->pinned = std::move(part.pinned);
    move->bytes = move->shard_bytes[0] = part.bytes;
    return Status::Ok();
  }
  Parts parts;
  Split(keys, parts);
  std::vector<Key> mine;
  for (uint32_t s = 0; s < shards(); ++s) {
    const std::span<const uint32_t> at = parts.of(s);
    KeysOf(keys, at, &mine);
    if (mine.empty()) continue;
    // The table was found, so a shard has no error to return: one would be
    // a defect, not a state to unwind.
    Status st = shards_[s]->BeginMoveUp(table, mine, &part);
    STRATA_ASSERT(st.ok(), "dram cache BeginMoveUp: a shard failed");
    for (size_t j = 0; j < at.size(); ++j) move->pinned[at[j]] = part.pinned[j];
    move->shard_bytes[s] = part.bytes;
    move->bytes += part.bytes;
  }
  return Status::Ok();
}

Status DramCache::EndMoveUp(TableId table, std::span<const Key> keys, MoveUp* move, bool moved) {
  STRATA_ASSIGN_OR_RETURN(const TableSpec* spec, FindTable(table, "EndMoveUp"));
  if (move->pinned.size() != keys.size() || move->shard_bytes.size() != shards()) {
    return Status::InvalidArgument(
        "dram cache EndMoveUp of table '" + spec->name + "' (id " + std::to_string(spec->id) +
        "): " + std::to_string(keys.size()) + " keys and " + std::to_string(shards()) +
        " shards, BeginMoveUp had " + std::to_string(move->pinned.size()) + " keys and " +
        std::to_string(move->shard_bytes.size()) + " shards");
  }
  DramShard::MoveUp part;
  Status status = Status::Ok();
  if (shards() == 1) {
    part.pinned = std::move(move->pinned);
    part.bytes = move->bytes;
    status = shards_[0]->EndMoveUp(table, keys, &part, moved);
  } else {
    Parts parts;
    Split(keys, parts);
    std::vector<Key> mine;
    for (uint32_t s = 0; s < shards(); ++s) {
      const std::span<const uint32_t> at = parts.of(s);
      KeysOf(keys, at, &mine);
      if (mine.empty()) continue;
      part.pinned.clear();
      for (uint32_t i : at) part.pinned.push_back(move->pinned[i]);
      part.bytes = move->shard_bytes[s];
      // Every shard ends its part, whatever another one returned.
      Status st = shards_[s]->EndMoveUp(table, mine, &part, moved);
      if (status.ok() && !st.ok()) status = st;
    }
  }
  move->pinned.clear();
  move->bytes = 0;
  move->shard_bytes.clear();
  return status;
}

Status DramCache::SetNextUse(TableId table, std::span<const Key> keys,
                             std::span<const Clock> next_use) {
  if (shards() == 1) return shards_[0]->SetNextUse(table, keys, next_use);
  STRATA_ASSIGN_OR_RETURN(const TableSpec* spec, FindTable(table, "SetNextUse"));
  STRATA_RETURN_IF_ERROR(
      CheckSpan(*spec, "SetNextUse", keys.size(), next_use.size(), "next_use", false));
  // Per-thread scratch (the planner calls this for every chunk of intents),
  // reached through references (see Lookup).
  thread_local Parts parts_tl;
  thread_local std::vector<Key> mine_tl;
  thread_local std::vector<Clock> uses_tl;
  Parts& parts = parts_tl;
  std::vector<Key>& mine = mine_tl;
  std::vector<Clock>& uses = uses_tl;
  Split(keys, parts);
  for (uint32_t s = 0; s < shards(); ++s) {
    const std::span<const uint32_t> at = parts.of(s);
    KeysOf(keys, at, &mine);
    if (mine.empty()) continue;
    uses.clear();
    for (uint32_t i : at) uses.push_back(next_use[i]);
    STRATA_RETURN_IF_ERROR(shards_[s]->SetNextUse(table, mine, uses));
  }
  return Status::Ok();
}

Status DramCache::FlushDirty() {
  for (auto& shard : shards_) STRATA_RETURN_IF_ERROR(shard->FlushDirty());
  return Status::Ok();
}

Result<uint64_t> DramCache::CleanAhead(uint64_t window_rows, uint64_t rows_max) {
  const uint64_t k = shards();
  const uint64_t window = window_rows / k + (window_rows % k != 0 ? 1 : 0);
  const uint64_t most = rows_max / k + (rows_max % k != 0 ? 1 : 0);
  uint64_t cleaned = 0;
  for (auto& shard : shards_) {
    STRATA_ASSIGN_OR_RETURN(uint64_t rows, shard->CleanAhead(window, most));
    cleaned += rows;
  }
  return cleaned;
}

Status DramCache::ForEach(
    TableId table, const std::function<Status(Key, std::span<const std::byte>, bool dirty)>& fn) {
  for (auto& shard : shards_) STRATA_RETURN_IF_ERROR(shard->ForEach(table, fn));
  return Status::Ok();
}

// The shards' stats, each read under its own mutex: while rows move, bytes
// one shard gives back to the shared budget and another borrows may be in
// both sums.
DramCacheStats DramCache::Stats() const {
  DramCacheStats s;
  for (const auto& shard : shards_) {
    const DramCacheStats p = shard->Stats();
    s.rows += p.rows;
    s.hits += p.hits;
    s.misses += p.misses;
    s.lookup_retries += p.lookup_retries;
    s.inserts += p.inserts;
    s.evictions += p.evictions;
    s.dirty_writebacks += p.dirty_writebacks;
    s.cleaned_ahead += p.cleaned_ahead;
    s.clean_plans += p.clean_plans;
    s.writeback_errors += p.writeback_errors;
    s.room_waits += p.room_waits;
    s.insert_waits += p.insert_waits;
    s.bytes_used += p.bytes_used;
    s.index_bytes += p.index_bytes;
  }
  s.bytes_max = options_.dram_bytes_max;
  s.rows_max = rows_max_;
  return s;
}

bool DramCache::numa_interleaved() const {
  for (const auto& shard : shards_) {
    if (!shard->numa_interleaved()) return false;
  }
  return true;
}

}  // namespace strata::storage
