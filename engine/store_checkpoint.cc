// Checkpoint and ScanTable.
//
// Checkpoint: with every table locked (ascending ids), T0's dirty rows are
// written to T2 and marked clean, T1 flushes its dirty rows, then the row
// store makes everything durable and switches its manifest, carrying the
// engine's meta (tables, clocks). A failure leaves dirty rows dirty: nothing
// is lost and a retry can succeed. While a worker holds a chunked Push that
// failed part-way (store_push_retry.cc) it refuses, so that no checkpoint
// holds half a Push.
#include <cstring>
#include <unordered_set>

#include "engine/store_impl.h"

namespace strata::engine {

// Collects T0's dirty rows on the host, writes them to T2, then marks them
// clean in T0 (same rows, same next_use, pins kept).
Status StoreImpl::WriteBackT0(Table& table) {
  std::vector<Key> keys;
  std::vector<float> rows;
  std::vector<int64_t> next_use;
  STRATA_RETURN_IF_ERROR(table.t0->ExportAll([&](const HostRows& chunk) -> Status {
    for (uint64_t i = 0; i < chunk.keys.size(); ++i) {
      if (!chunk.dirty[i]) continue;
      keys.push_back(chunk.keys[i]);
      rows.insert(rows.end(), chunk.rows.begin() + i * table.row_floats,
                  chunk.rows.begin() + (i + 1) * table.row_floats);
      next_use.push_back(chunk.next_use[i]);
    }
    return Status::Ok();
  }));
  if (keys.empty()) return Status::Ok();
  STRATA_RETURN_IF_ERROR(
      ssd_->MultiPut(table.id, keys,
                     std::span<const std::byte>(reinterpret_cast<const std::byte*>(rows.data()),
                                                rows.size() * sizeof(float))));
  const std::vector<uint8_t> clean(keys.size(), 0);
  STRATA_RETURN_IF_ERROR(table.t0->Insert(keys, rows.data(), next_use.data(), clean.data()));
  counters_.t0_dirty_out.fetch_add(keys.size(), std::memory_order_relaxed);
  return Status::Ok();
}

Status StoreImpl::Checkpoint() {
  CallScope call(this);
  STRATA_RETURN_IF_ERROR(call.status());
  STRATA_RETURN_IF_ERROR(PlannerError());
  std::vector<std::unique_lock<base::Mutex>> locks;
  locks.reserve(tables_.size());
  for (auto& table : tables_) locks.emplace_back(table->mu);
  // With every table locked no Push runs, so no partial Push starts or ends
  // meanwhile.
  STRATA_RETURN_IF_ERROR(CheckNoPartialPush());
  for (auto& table : tables_) {
    table->mu.AssertHeld();  // through `locks`, which the analysis cannot follow
    STRATA_RETURN_IF_ERROR(
        WriteBackT0(*table).WithContext("checkpoint of table '" + table->name + "'"));
  }
  STRATA_RETURN_IF_ERROR(dram_->FlushDirty().WithContext("checkpoint: T1 write-back"));
  std::vector<std::byte> meta = EncodeMeta();
  return ssd_->Checkpoint(meta).WithContext("checkpoint of " + options_.dir);
}

Status StoreImpl::ScanTable(TableId table_id,
                            const std::function<Status(Key, std::span<const float>)>& fn) {
  CallScope call(this);
  STRATA_RETURN_IF_ERROR(call.status());
  STRATA_RETURN_IF_ERROR(CheckTable(table_id));
  Table& table = *tables_[table_id];
  base::MutexLock lock(&table.mu);
  std::unordered_set<Key> seen;
  STRATA_RETURN_IF_ERROR(table.t0->ExportAll([&](const HostRows& chunk) -> Status {
    for (uint64_t i = 0; i < chunk.keys.size(); ++i) {
      seen.insert(chunk.keys[i]);
      STRATA_RETURN_IF_ERROR(
          fn(chunk.keys[i],
             std::span<const float>(chunk.rows.data() + i * table.row_floats, table.dim)));
    }
    return Status::Ok();
  }));
  auto visit_bytes = [&](Key key, std::span<const std::byte> row) -> Status {
    if (!seen.insert(key).second) return Status::Ok();
    if (row.size() != table.row_bytes) {
      return Status::Corruption("table '" + table.name + "': key " + std::to_string(key) +
                                " has a row of " + std::to_string(row.size()) + " bytes, not " +
                                std::to_string(table.row_bytes));
    }
    std::vector<float> floats(table.dim);
    std::memcpy(floats.data(), row.data(), table.dim * sizeof(float));
    return fn(key, floats);
  };
  STRATA_RETURN_IF_ERROR(dram_->ForEach(table.id, [&](Key key, std::span<const std::byte> row,
                                                      bool) { return visit_bytes(key, row); }));
  return ssd_->Scan(table.id, visit_bytes);
}

}  // namespace strata::engine
