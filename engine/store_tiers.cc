// Moving rows between the tiers, under the table's lock, and the cleaner.
//
// Up: MakeResident fetches the missing rows (T1, else T2, else the
// initializer), inserts them into T0 with their dirty flags and only then
// erases them from T1; meanwhile T1 counts them as leaving, so the rows T0
// demotes to make room take their place there (DramCache::BeginMoveUp). Down: EvictFromT0 exports a
// table's T0 rows with the largest next use and demotes them into T1 (if T1 cannot take them they
// go back into T0); MakeT0Room (store_eviction.cc) decides how many each table gives, by one order
// across tables. Room is made with the batch's resident rows pinned. The cleaner thread writes T1's
// dirty rows ahead of their eviction.
#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/assert.h"
#include "base/log.h"
#include "engine/store_impl.h"

namespace strata::engine {

Status StoreImpl::MakeResident(Table& table, std::span<const Key> unique_keys, bool count_access,
                               uint64_t* brought_in) {
  *brought_in = 0;
  const size_t n = unique_keys.size();
  if (n == 0) return Status::Ok();
  std::vector<uint8_t> found;
  STRATA_RETURN_IF_ERROR(table.t0->Presence(unique_keys, &found));
  std::vector<Key> present, missing;
  for (size_t i = 0; i < n; ++i) (found[i] ? present : missing).push_back(unique_keys[i]);
  if (missing.empty()) return Status::Ok();

  // The rows first, copied out of T1 (else read from T2 or created): the
  // demotions that make room below go into T1 and may evict T1's oldest
  // rows, which must not be the ones this batch is taking (they would be
  // read back from the SSD). They stay in T1 until T0 holds them; should T1
  // evict one meanwhile it writes it down first, so no copy is lost.
  std::vector<float> rows;
  std::vector<uint8_t> dirty, from_t1;
  STRATA_RETURN_IF_ERROR(FetchRows(table, missing, &rows, &dirty, &from_t1));
  // The rows T1 gave are pinned there and counted as leaving: the demotions
  // below take their place instead of evicting as many other T1 rows, so T0
  // and T1 together keep holding device_rows_max + dram_rows_max rows.
  std::vector<Key> leave_t1;
  for (size_t i = 0; i < missing.size(); ++i) {
    if (from_t1[i]) leave_t1.push_back(missing[i]);
  }
  storage::DramCache::MoveUp move;
  if (!leave_t1.empty()) STRATA_RETURN_IF_ERROR(dram_->BeginMoveUp(table.id, leave_t1, &move));
  Status placed = PlaceInT0(table, unique_keys, present, missing, rows, dirty);
  // Placed: the rows have their new home in T0 and only now leave T1.
  // Otherwise they stay in T1, unpinned.
  if (!leave_t1.empty()) {
    Status ended = dram_->EndMoveUp(table.id, leave_t1, &move, placed.ok());
    STRATA_RETURN_IF_ERROR(placed);
    STRATA_RETURN_IF_ERROR(ended);
  }
  STRATA_RETURN_IF_ERROR(placed);
  const uint64_t m = missing.size();
  counters_.t0_rows_in.fetch_add(m, std::memory_order_relaxed);
  counters_.t0_bytes_in.fetch_add(m * table.row_bytes, std::memory_order_relaxed);
  if (count_access) counters_.stall_pulls.fetch_add(m, std::memory_order_relaxed);
  *brought_in = m;
  return Status::Ok();
}

// MakeResident's middle: room in T0 (the batch's resident rows pinned), then
// the fetched rows inserted with their next uses and dirty flags.
Status StoreImpl::PlaceInT0(Table& table, std::span<const Key> unique_keys,
                            std::span<const Key> present, std::span<const Key> missing,
                            const std::vector<float>& rows, const std::vector<uint8_t>& dirty) {
  // Room: the table's own slots first (at most t0_rows_cap rows), then T0
  // as a whole (device_rows_max rows of all tables): the victims are the
  // rows with the largest next use among every table's T0 (MakeT0Room).
  const uint64_t size = table.t0->Size();
  const uint64_t m = missing.size();
  const uint64_t own_over = size + m > table.t0_rows_cap ? size + m - table.t0_rows_cap : 0;
  const uint64_t total = T0Rows() - table.t0_rows.load(std::memory_order_relaxed) + size;
  const uint64_t all_over =
      total + m > options_.device_rows_max ? total + m - options_.device_rows_max : 0;
  if (own_over > 0 || all_over > 0) {
    // Pin the batch's resident rows so eviction cannot pick them.
    STRATA_RETURN_IF_ERROR(table.t0->Pin(present, true));
    Status evicted = EvictFromT0(table, own_over);
    if (evicted.ok()) evicted = MakeT0Room(table, all_over - std::min(all_over, own_over));
    STRATA_RETURN_IF_ERROR(table.t0->Pin(present, false));
    STRATA_RETURN_IF_ERROR(evicted);
    const uint64_t now = table.t0->Size();
    if (table.t0_rows_cap < now + m) {
      return Status::ResourceExhausted(
          "table '" + table.name + "': T0 has room for " +
          std::to_string(table.t0_rows_cap - std::min(table.t0_rows_cap, now)) +
          " more rows, the batch needs " + std::to_string(m) + " (the rest is pinned)");
    }
  }

  std::vector<int64_t> next_use;
  STRATA_RETURN_IF_ERROR(NextUses(table, missing, &next_use));
  Status inserted = table.t0->Insert(missing, rows.data(), next_use.data(), dirty.data());
  if (inserted.IsResourceExhausted()) {
    // Some key found no slot within the table's probe bound (a crowded
    // neighbourhood, rare below the load factor T0 is sized for): evict more
    // rows, the whole batch pinned meanwhile, and place the batch again.
    STRATA_RETURN_IF_ERROR(table.t0->Pin(unique_keys, true));
    Status evicted = EvictFromT0(table, std::max<uint64_t>(m, table.t0_share / 16));
    STRATA_RETURN_IF_ERROR(table.t0->Pin(unique_keys, false));
    STRATA_RETURN_IF_ERROR(evicted);
    inserted = table.t0->Insert(missing, rows.data(), next_use.data(), dirty.data());
  }
  table.t0_rows.store(table.t0->Size(), std::memory_order_relaxed);
  return inserted.WithContext("table '" + table.name + "' T0");
}

Status StoreImpl::FetchRows(Table& table, std::span<const Key> keys, std::vector<float>* rows,
                            std::vector<uint8_t>* dirty, std::vector<uint8_t>* from_t1) {
  const size_t n = keys.size();
  rows->resize(n * table.row_floats);
  dirty->assign(n, 0);
  from_t1->assign(n, 0);
  std::span<std::byte> row_bytes(reinterpret_cast<std::byte*>(rows->data()), n * table.row_bytes);
  STRATA_RETURN_IF_ERROR(dram_->Lookup(table.id, keys, row_bytes, *from_t1, *dirty));
  std::vector<Key> below;
  std::vector<size_t> below_at;
  for (size_t i = 0; i < n; ++i) {
    if (!(*from_t1)[i]) {
      below.push_back(keys[i]);
      below_at.push_back(i);
    }
  }
  counters_.t1_hits.fetch_add(n - below.size(), std::memory_order_relaxed);
  counters_.t1_misses.fetch_add(below.size(), std::memory_order_relaxed);
  if (below.empty()) return Status::Ok();
  std::vector<float> ssd_rows(below.size() * table.row_floats);
  std::vector<uint8_t> found(below.size(), 0);
  STRATA_RETURN_IF_ERROR(
      ssd_->MultiGet(table.id, below,
                     std::span<std::byte>(reinterpret_cast<std::byte*>(ssd_rows.data()),
                                          ssd_rows.size() * sizeof(float)),
                     found));
  counters_.ssd_row_reads.fetch_add(below.size(), std::memory_order_relaxed);
  uint64_t created = 0;
  for (size_t j = 0; j < below.size(); ++j) {
    float* dst = rows->data() + below_at[j] * table.row_floats;
    if (found[j]) {
      std::memcpy(dst, ssd_rows.data() + j * table.row_floats, table.row_bytes);
    } else {
      kernels::InitRow(table.init, table.optimizer, below[j], table.dim, dst);
      ++created;
    }
  }
  counters_.created_rows.fetch_add(created, std::memory_order_relaxed);
  return Status::Ok();
}

Status StoreImpl::EvictFromT0(Table& table, uint64_t count) {
  if (count == 0) return Status::Ok();
  HostRows out;
  STRATA_RETURN_IF_ERROR(table.t0->Evict(count, &out));
  const uint64_t n = out.keys.size();
  if (n == 0) return Status::Ok();
  // T1 keeps the engine's order, fallback values included. It takes the rows
  // in pieces it can hold whole: the batch may outnumber all of T1.
  std::vector<uint8_t> placed(n, 0);
  Status s = dram_->InsertInPieces(
      table.id, out.keys,
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(out.rows.data()),
                                 out.rows.size() * sizeof(float)),
      out.dirty, out.next_use, placed);
  uint64_t moved = 0;
  uint64_t dirty_rows = 0;
  for (uint64_t i = 0; i < n; ++i) {
    moved += placed[i];
    dirty_rows += placed[i] != 0 && out.dirty[i] ? 1 : 0;
  }
  if (!s.ok()) {
    // T1 could not take the rest (its write-back failed): those rows go back
    // to T0, so none is lost, and the error reaches the caller.
    HostRows back;
    for (uint64_t i = 0; i < n; ++i) {
      if (placed[i] != 0) continue;
      back.keys.push_back(out.keys[i]);
      back.rows.insert(back.rows.end(), out.rows.begin() + i * table.row_floats,
                       out.rows.begin() + (i + 1) * table.row_floats);
      back.next_use.push_back(out.next_use[i]);
      back.dirty.push_back(out.dirty[i]);
    }
    Status again =
        table.t0->Insert(back.keys, back.rows.data(), back.next_use.data(), back.dirty.data());
    STRATA_ASSERT(again.ok(), "T0 refused rows it just evicted");
  }
  table.t0_rows.store(table.t0->Size(), std::memory_order_relaxed);
  if (moved > 0) KickCleaner(moved);
  counters_.t0_evictions.fetch_add(moved, std::memory_order_relaxed);
  counters_.t0_rows_out.fetch_add(moved, std::memory_order_relaxed);
  counters_.t0_bytes_out.fetch_add(moved * table.row_bytes, std::memory_order_relaxed);
  counters_.t0_dirty_out.fetch_add(dirty_rows, std::memory_order_relaxed);
  if (!s.ok()) {
    return s.WithContext("evicting " + std::to_string(n) + " rows of table '" + table.name +
                         "' from T0 to T1");
  }
  return Status::Ok();
}

void StoreImpl::KickCleaner(uint64_t rows) {
  {
    base::MutexLock lock(&cleaner_.mu);
    cleaner_.kicks += rows;
  }
  cleaner_.cv.Signal();
}

// Runs after T1 took window_max / kCleanWakeDivisor rows (kicked) or every
// planner period: writes the dirty rows among the ones the next
// `dram_rows_max / 4` rows T1 takes would evict, in bounded passes. While T1
// has free room for that many rows nothing is due: no SSD write, and no
// promotion waits for a write of the row it takes (DramCache::Erase waits
// for one). An I/O error costs nothing but the head start: the rows stay
// dirty and their eviction writes them (and reports an error that
// persists).
void StoreImpl::CleanerLoop() {
  const auto period =
      std::chrono::microseconds(uint64_t{std::max<uint32_t>(options_.planner_round_us, 1)} * 10);
  const uint64_t window_max = std::max<uint64_t>(options_.dram_rows_max / kCleanWindowDivisor, 1);
  const uint64_t passes_max = window_max / kCleanBatchRowsMax + 1;
  const uint64_t wake_rows = std::max<uint64_t>(window_max / kCleanWakeDivisor, 1);
  uint32_t row_bytes_max = 1;
  for (const auto& table : tables_) row_bytes_max = std::max(row_bytes_max, table->row_bytes);
  uint64_t seen = 0;
  while (true) {
    {
      base::MutexLock lock(&cleaner_.mu);
      const auto deadline = std::chrono::steady_clock::now() + period;
      while (!cleaner_.stop && cleaner_.kicks - seen < wake_rows &&
             cleaner_.cv.WaitUntil(&cleaner_.mu, deadline)) {
      }
      if (cleaner_.stop) return;
      seen = cleaner_.kicks;
    }
    // The rows T1 takes before it must evict: its free bytes in rows of the
    // widest table (the fewest that fit).
    const storage::DramCacheStats t1 = dram_->Stats();
    const uint64_t free_rows =
        (t1.bytes_max - std::min(t1.bytes_max, t1.bytes_used)) / row_bytes_max;
    if (free_rows >= window_max) continue;
    const uint64_t window = window_max - free_rows;
    for (uint64_t pass = 0; pass < passes_max; ++pass) {
      Result<uint64_t> cleaned = dram_->CleanAhead(window, kCleanBatchRowsMax);
      if (!cleaned.ok()) {
        if (counters_.cleaner_io_errors.fetch_add(1, std::memory_order_relaxed) == 0) {
          STRATA_LOG_WARN("cleaner of %s: %s (retried; further errors only counted)",
                          options_.dir.c_str(), cleaned.status().ToString().c_str());
        }
        break;
      }
      if (cleaned.value() == 0) break;
      counters_.cleaned_ahead.fetch_add(cleaned.value(), std::memory_order_relaxed);
    }
  }
}

}  // namespace strata::engine
