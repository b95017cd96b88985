// Checkpoint, ScanTable and Stats.
//
// Checkpoint: with every table locked (ascending ids), T0's dirty rows are
// written to T2 and marked clean, T1 flushes its dirty rows, then the row
// store makes everything durable and switches its manifest, carrying the
// engine's meta (tables, clocks). A failure leaves dirty rows dirty: nothing
// is lost and a retry can succeed.
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "engine/store_impl.h"

namespace strata {

std::string StoreStats::ToString() const {
  char buf[1024];
  std::snprintf(
      buf, sizeof(buf),
      "T0(%s): hits %llu misses %llu rows %llu/%llu in %llu evicted %llu dirty-out %llu | "
      "T1: hits %llu misses %llu rows %llu/%llu evicted %llu written back %llu "
      "(cleaned ahead %llu) | "
      "SSD: row reads %llu row writes %llu | pulls %llu pushes %llu stalls %llu "
      "prefetched %llu (late %llu) intents %llu (expired %llu, deferred %llu) | "
      "planner rounds %llu mean %.1f us max %llu us",
      t0_on_gpu ? "GPU" : "host", (unsigned long long)t0.hits, (unsigned long long)t0.misses,
      (unsigned long long)t0.rows, (unsigned long long)t0.rows_max, (unsigned long long)t0.rows_in,
      (unsigned long long)t0.evictions, (unsigned long long)t0.dirty_writebacks,
      (unsigned long long)t1.hits, (unsigned long long)t1.misses, (unsigned long long)t1.rows,
      (unsigned long long)t1.rows_max, (unsigned long long)t1.evictions,
      (unsigned long long)t1.dirty_writebacks, (unsigned long long)cleaned_ahead,
      (unsigned long long)ssd_row_reads, (unsigned long long)ssd_row_writes,
      (unsigned long long)pulls, (unsigned long long)pushes, (unsigned long long)stall_pulls,
      (unsigned long long)prefetched_rows, (unsigned long long)late_prefetches,
      (unsigned long long)intents, (unsigned long long)expired_intents,
      (unsigned long long)deferred_intents, (unsigned long long)planner_rounds,
      planner_round_us_mean, (unsigned long long)planner_round_us_max);
  return buf;
}

namespace engine {

// Collects T0's dirty rows on the host, writes them to T2, then marks them
// clean in T0 (same rows, same next_use, pins kept).
Status StoreImpl::WriteBackT0(Table& table) {
  std::vector<Key> keys;
  std::vector<float> rows;
  std::vector<int64_t> next_use;
  HostRows chunk;
  STRATA_RETURN_IF_ERROR(table.t0->ExportAll([&](const kernels::RowBatch& batch) -> Status {
    STRATA_RETURN_IF_ERROR(CopyRowsToHost(runner_, batch, table.row_floats, &chunk));
    for (uint64_t i = 0; i < batch.count; ++i) {
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
  RunnerStaging& st = table.staging;
  const std::vector<uint8_t> clean(std::min<size_t>(keys.size(), kChunkKeysMax), 0);
  for (size_t off = 0; off < keys.size(); off += kChunkKeysMax) {
    size_t n = std::min<size_t>(kChunkKeysMax, keys.size() - off);
    STRATA_RETURN_IF_ERROR(StageRows(table, std::span<const Key>(keys.data() + off, n),
                                     rows.data() + off * table.row_floats, next_use.data() + off,
                                     clean.data()));
    STRATA_RETURN_IF_ERROR(table.t0->InsertOrAssign(st.keys.data(), n, st.rows.data(),
                                                    st.next_use.data(), st.dirty.data()));
  }
  counters_.t0_dirty_out.fetch_add(keys.size(), std::memory_order_relaxed);
  return Status::Ok();
}

Status StoreImpl::Checkpoint() {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  STRATA_RETURN_IF_ERROR(PlannerError());
  std::vector<std::unique_lock<base::Mutex>> locks;
  locks.reserve(tables_.size());
  for (auto& table : tables_) locks.emplace_back(table->mu);
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
  STRATA_RETURN_IF_ERROR(CheckOpen());
  STRATA_RETURN_IF_ERROR(CheckTable(table_id));
  Table& table = *tables_[table_id];
  base::MutexLock lock(&table.mu);
  std::unordered_set<Key> seen;
  HostRows chunk;
  STRATA_RETURN_IF_ERROR(table.t0->ExportAll([&](const kernels::RowBatch& batch) -> Status {
    STRATA_RETURN_IF_ERROR(CopyRowsToHost(runner_, batch, table.row_floats, &chunk));
    for (uint64_t i = 0; i < batch.count; ++i) {
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

StoreStats StoreImpl::Stats() const {
  StoreStats s;
  const StoreCounters& c = counters_;
  s.t0_on_gpu = runner_ == kernels::Runner::kGpu;
  s.t0.hits = c.t0_hits.load();
  s.t0.misses = c.t0_misses.load();
  s.t0.rows_in = c.t0_rows_in.load();
  s.t0.rows_out = c.t0_rows_out.load();
  s.t0.bytes_in = c.t0_bytes_in.load();
  s.t0.bytes_out = c.t0_bytes_out.load();
  s.t0.evictions = c.t0_evictions.load();
  s.t0.dirty_writebacks = c.t0_dirty_out.load();
  s.t0.rows_max = 0;
  for (const auto& t : tables_) s.t0.rows_max += t->t0_share;
  for (const auto& t : tables_) {
    base::MutexLock lock(&t->mu);
    s.t0.rows += t->t0->Size();
  }
  if (dram_) {
    storage::DramCacheStats d = dram_->Stats();
    s.t1.hits = c.t1_hits.load();
    s.t1.misses = c.t1_misses.load();
    s.t1.rows = d.rows;
    s.t1.rows_max = options_.dram_rows_max;
    s.t1.evictions = d.evictions;
    s.t1.dirty_writebacks = d.dirty_writebacks;
    s.t1.rows_in = d.inserts;
  }
  if (ssd_) {
    storage::RowStoreStats r = ssd_->Stats();
    s.ssd_row_reads = c.ssd_row_reads.load();
    s.ssd_row_writes = r.rows_written;
  }
  s.pulls = c.pulls.load();
  s.pushes = c.pushes.load();
  s.stall_pulls = c.stall_pulls.load();
  s.prefetched_rows = c.prefetched_rows.load();
  s.late_prefetches = c.late_prefetches.load();
  s.intents = c.intents.load();
  s.expired_intents = c.expired_intents.load();
  s.deferred_intents = c.deferred_intents.load();
  s.planner_rounds = c.planner_rounds.load();
  s.planner_io_errors = c.planner_io_errors.load();
  s.cleaned_ahead = c.cleaned_ahead.load();
  s.cleaner_io_errors = c.cleaner_io_errors.load();
  s.planner_round_us_max = c.planner_round_us_max.load();
  s.planner_round_us_mean =
      s.planner_rounds ? double(c.planner_round_us_total.load()) / double(s.planner_rounds) : 0;
  return s;
}

}  // namespace engine
}  // namespace strata
