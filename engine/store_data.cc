// Pull, Push and the movement of rows between the tiers.
//
// A Pull or Push takes its table's lock, brings the batch's unique keys into
// T0 (a miss is fetched synchronously: T1, else T2, else created by the
// initializer, and counted as a stall), then runs one T0 operation on the
// whole batch. Room in T0 is made by evicting the rows with the largest
// next_use into T1, the batch's own resident rows pinned meanwhile. A batch
// with more unique keys than T0 has room for is done in chunks.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "base/assert.h"
#include "engine/store_impl.h"

namespace strata::engine {
namespace {

// The sketch's key for a row: the table id folded in, so one sketch serves
// every table (a bijection, so two rows of one table never share a key).
Key SketchKey(TableId table, Key key) { return key ^ (uint64_t{table} * 0x9e3779b97f4a7c15ull); }

std::vector<Key> SortedUnique(std::span<const Key> keys) {
  std::vector<Key> unique(keys.begin(), keys.end());
  std::sort(unique.begin(), unique.end());
  unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
  return unique;
}

}  // namespace

uint64_t StoreImpl::PullRoom(const Table& table) const {
  const uint64_t limit = table.t0_limit.load(std::memory_order_relaxed);
  return limit - std::min(limit, table.intent_pinned.load(std::memory_order_relaxed));
}

// The fallback order of a row without intent, above every real clock: LRU
// (older access seq = larger value = evicted first), or, with a frequency
// sketch, least frequent first and LRU among equal counts.
int64_t StoreImpl::FallbackValue(uint64_t freq, uint64_t seq) const {
  uint64_t score = seq & kFallbackSeqMask;
  score |= std::min(freq, kFallbackFreqMax) << kFallbackFreqShift;
  return kFallbackBase + (kFallbackSpan - 1 - static_cast<int64_t>(score));
}

Status StoreImpl::NextUses(Table& table, std::span<const Key> keys,
                           std::vector<int64_t>* next_use) {
  const uint64_t seq = access_seq_.fetch_add(1, std::memory_order_relaxed) + 1;
  next_use->resize(keys.size());
  if (sketch_) {
    base::MutexLock lock(&sketch_mu_);
    for (size_t i = 0; i < keys.size(); ++i) {
      (*next_use)[i] = FallbackValue(sketch_->Estimate(SketchKey(table.id, keys[i])), seq);
    }
  } else {
    for (size_t i = 0; i < keys.size(); ++i) (*next_use)[i] = FallbackValue(0, seq);
  }
  if (tracked_keys_.load(std::memory_order_acquire) == 0) return Status::Ok();
  base::MutexLock lock(&intent_mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    Clock c = intents_.NextUse(table.id, keys[i]);
    if (c != kClockNever) (*next_use)[i] = c;
  }
  return Status::Ok();
}

Status StoreImpl::Touch(Table& table, std::span<const Key> unique_keys) {
  if (sketch_) {
    std::vector<Key> mixed(unique_keys.size());
    for (size_t i = 0; i < unique_keys.size(); ++i) mixed[i] = SketchKey(table.id, unique_keys[i]);
    base::MutexLock lock(&sketch_mu_);
    sketch_->Add(mixed);
  }
  return RefreshNextUse(table, unique_keys, /*with_t1=*/false);
}

// Gives `keys` their current next use (intent or fallback) in T0 and, with
// `with_t1`, in T1 (rows absent from a tier are skipped there). T1 is left
// out on the Pull path: its order is set again when a row is demoted.
Status StoreImpl::RefreshNextUse(Table& table, std::span<const Key> keys, bool with_t1) {
  std::vector<int64_t> next_use;
  RunnerStaging& st = table.staging;
  for (size_t off = 0; off < keys.size(); off += kChunkKeysMax) {
    std::span<const Key> chunk =
        keys.subspan(off, std::min<size_t>(kChunkKeysMax, keys.size() - off));
    STRATA_RETURN_IF_ERROR(NextUses(table, chunk, &next_use));
    STRATA_RETURN_IF_ERROR(StageKeys(table, chunk));
    STRATA_RETURN_IF_ERROR(ReserveRunner(st.next_use, runner_, chunk.size()));
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(runner_, st.next_use.data(), next_use.data(),
                                                 chunk.size() * sizeof(int64_t)));
    STRATA_RETURN_IF_ERROR(table.t0->SetNextUse(st.keys.data(), chunk.size(), st.next_use.data()));
    if (with_t1) STRATA_RETURN_IF_ERROR(dram_->SetNextUse(table.id, chunk, next_use));
  }
  return Status::Ok();
}

// Copies keys into the table's runner staging (st.keys).
Status StoreImpl::StageKeys(Table& table, std::span<const Key> keys, void* stream) {
  STRATA_RETURN_IF_ERROR(ReserveRunner(table.staging.keys, runner_, keys.size()));
  return kernels::RunnerCopyIn(runner_, table.staging.keys.data(), keys.data(), keys.size_bytes(),
                               stream);
}

// Copies whole rows with their next uses and dirty flags into the staging.
Status StoreImpl::StageRows(Table& table, std::span<const Key> keys, const float* rows,
                            const int64_t* next_use, const uint8_t* dirty) {
  RunnerStaging& st = table.staging;
  const size_t n = keys.size();
  STRATA_RETURN_IF_ERROR(StageKeys(table, keys));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.rows, runner_, n * table.row_floats));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.next_use, runner_, n));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.dirty, runner_, n));
  STRATA_RETURN_IF_ERROR(
      kernels::RunnerCopyIn(runner_, st.rows.data(), rows, n * size_t{table.row_bytes}));
  STRATA_RETURN_IF_ERROR(
      kernels::RunnerCopyIn(runner_, st.next_use.data(), next_use, n * sizeof(int64_t)));
  return kernels::RunnerCopyIn(runner_, st.dirty.data(), dirty, n);
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
  RunnerStaging& st = table.staging;
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.keys, runner_, count));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.rows, runner_, count * table.row_floats));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.next_use, runner_, count));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.dirty, runner_, count));
  kernels::RowBatch batch{st.keys.data(), st.rows.data(), st.next_use.data(), st.dirty.data(), 0};
  STRATA_RETURN_IF_ERROR(table.t0->EvictCandidates(count, &batch));
  const uint64_t n = batch.count;
  if (n == 0) return Status::Ok();
  HostRows out;
  STRATA_RETURN_IF_ERROR(CopyRowsToHost(runner_, batch, table.row_floats, &out));
  uint64_t dirty_rows = 0;
  for (uint8_t d : out.dirty) dirty_rows += d ? 1 : 0;
  // T1 keeps the engine's order, fallback values included.
  Status s =
      dram_->Insert(table.id, out.keys,
                    std::span<const std::byte>(reinterpret_cast<const std::byte*>(out.rows.data()),
                                               out.rows.size() * sizeof(float)),
                    out.dirty, out.next_use);
  if (!s.ok()) {
    // T1 could not take them (its write-back failed): the rows go back to T0,
    // so none is lost, and the error reaches the caller.
    Status back = table.t0->InsertOrAssign(st.keys.data(), n, st.rows.data(), st.next_use.data(),
                                           st.dirty.data());
    STRATA_ASSERT(back.ok(), "T0 refused rows it just evicted");
    return s.WithContext("evicting " + std::to_string(n) + " rows of table '" + table.name +
                         "' from T0 to T1");
  }
  KickCleaner();
  table.evict_frontier.store(*std::min_element(out.next_use.begin(), out.next_use.end()),
                             std::memory_order_relaxed);
  counters_.t0_evictions.fetch_add(n, std::memory_order_relaxed);
  counters_.t0_rows_out.fetch_add(n, std::memory_order_relaxed);
  counters_.t0_bytes_out.fetch_add(n * table.row_bytes, std::memory_order_relaxed);
  counters_.t0_dirty_out.fetch_add(dirty_rows, std::memory_order_relaxed);
  return Status::Ok();
}

Status StoreImpl::PinKeys(Table& table, std::span<const Key> keys, bool pin) {
  RunnerStaging& st = table.staging;
  for (size_t off = 0; off < keys.size(); off += kChunkKeysMax) {
    std::span<const Key> chunk =
        keys.subspan(off, std::min<size_t>(kChunkKeysMax, keys.size() - off));
    STRATA_RETURN_IF_ERROR(StageKeys(table, chunk));
    STRATA_RETURN_IF_ERROR(ReserveRunner(st.flags, runner_, chunk.size()));
    STRATA_RETURN_IF_ERROR(pin ? table.t0->Pin(st.keys.data(), chunk.size(), st.flags.data())
                               : table.t0->Unpin(st.keys.data(), chunk.size()));
  }
  return Status::Ok();
}

Status StoreImpl::MakeResident(Table& table, std::span<const Key> unique_keys, bool count_access,
                               uint64_t* brought_in) {
  *brought_in = 0;
  const size_t n = unique_keys.size();
  if (n == 0) return Status::Ok();
  RunnerStaging& st = table.staging;
  STRATA_RETURN_IF_ERROR(StageKeys(table, unique_keys));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.flags, runner_, n));
  STRATA_RETURN_IF_ERROR(table.t0->Find(st.keys.data(), n, nullptr, st.flags.data()));
  std::vector<uint8_t> found(n);
  STRATA_RETURN_IF_ERROR(kernels::RunnerCopyOut(runner_, found.data(), st.flags.data(), n));
  std::vector<Key> present, missing;
  for (size_t i = 0; i < n; ++i) (found[i] ? present : missing).push_back(unique_keys[i]);
  if (count_access) {
    counters_.t0_hits.fetch_add(present.size(), std::memory_order_relaxed);
    counters_.t0_misses.fetch_add(missing.size(), std::memory_order_relaxed);
  }
  if (missing.empty()) return Status::Ok();

  // Room: evict down to the table's current limit (a soft bound the planner
  // moves); the hard bound is what its slots take (t0_rows_cap).
  const uint64_t size = table.t0->Size();
  const uint64_t limit = table.t0_limit.load(std::memory_order_relaxed);
  if (size + missing.size() > limit) {
    // Pin the batch's resident rows so eviction cannot pick them.
    STRATA_RETURN_IF_ERROR(PinKeys(table, present, true));
    Status evicted = EvictFromT0(table, size + missing.size() - limit);
    STRATA_RETURN_IF_ERROR(PinKeys(table, present, false));
    STRATA_RETURN_IF_ERROR(evicted);
    const uint64_t now = table.t0->Size();
    if (table.t0_rows_cap < now + missing.size()) {
      return Status::ResourceExhausted(
          "table '" + table.name + "': T0 has room for " +
          std::to_string(table.t0_rows_cap - std::min(table.t0_rows_cap, now)) +
          " more rows, the batch needs " + std::to_string(missing.size()) +
          " (the rest is pinned)");
    }
  }

  std::vector<float> rows;
  std::vector<uint8_t> dirty, from_t1;
  STRATA_RETURN_IF_ERROR(FetchRows(table, missing, &rows, &dirty, &from_t1));
  std::vector<int64_t> next_use;
  STRATA_RETURN_IF_ERROR(NextUses(table, missing, &next_use));
  const size_t m = missing.size();
  STRATA_RETURN_IF_ERROR(StageRows(table, missing, rows.data(), next_use.data(), dirty.data()));
  Status inserted = table.t0->InsertOrAssign(st.keys.data(), m, st.rows.data(), st.next_use.data(),
                                             st.dirty.data());
  if (inserted.IsResourceExhausted()) {
    // Some key found no slot within the table's probe bound (a crowded
    // neighbourhood, rare below the load factor T0 is sized for): evict more
    // rows, the whole batch pinned meanwhile, and place the batch again.
    STRATA_RETURN_IF_ERROR(PinKeys(table, unique_keys, true));
    Status evicted = EvictFromT0(table, std::max<uint64_t>(m, table.t0_share / 16));
    STRATA_RETURN_IF_ERROR(PinKeys(table, unique_keys, false));
    STRATA_RETURN_IF_ERROR(evicted);
    STRATA_RETURN_IF_ERROR(StageRows(table, missing, rows.data(), next_use.data(), dirty.data()));
    inserted = table.t0->InsertOrAssign(st.keys.data(), m, st.rows.data(), st.next_use.data(),
                                        st.dirty.data());
  }
  STRATA_RETURN_IF_ERROR(inserted.WithContext("table '" + table.name + "' T0"));
  // The rows have their new home in T0; only now do they leave T1.
  std::vector<Key> leave_t1;
  for (size_t i = 0; i < m; ++i) {
    if (from_t1[i]) leave_t1.push_back(missing[i]);
  }
  if (!leave_t1.empty()) STRATA_RETURN_IF_ERROR(dram_->Erase(table.id, leave_t1));
  counters_.t0_rows_in.fetch_add(m, std::memory_order_relaxed);
  counters_.t0_bytes_in.fetch_add(m * table.row_bytes, std::memory_order_relaxed);
  if (count_access) counters_.stall_pulls.fetch_add(m, std::memory_order_relaxed);
  *brought_in = m;
  return Status::Ok();
}

// Every key of a batch made resident must be found; a miss here would hand
// the caller a row it never got, so it is an error, never silent.
Status StoreImpl::CheckAllFound(Table& table, std::span<const Key> keys) {
  std::vector<uint8_t> found(keys.size());
  STRATA_RETURN_IF_ERROR(
      kernels::RunnerCopyOut(runner_, found.data(), table.staging.flags.data(), keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!found[i]) {
      return Status::Internal("table '" + table.name + "': key " + std::to_string(keys[i]) +
                              " missing from T0 right after it was made resident");
    }
  }
  return Status::Ok();
}

Status StoreImpl::CheckDataCall(WorkerId worker, TableId table, std::span<const Key> keys,
                                const void* data, const char* what) const {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  STRATA_RETURN_IF_ERROR(CheckWorker(worker));
  STRATA_RETURN_IF_ERROR(CheckTable(table));
  return CheckBatch(keys, data, what);
}

bool StoreImpl::NeedsChunks(const Table& table, size_t unique_keys) const {
  return unique_keys > PullRoom(table) || unique_keys > kChunkKeysMax * 16;
}

Status StoreImpl::Pull(WorkerId worker, TableId table_id, std::span<const Key> keys, float* out,
                       void* stream) {
  STRATA_RETURN_IF_ERROR(CheckDataCall(worker, table_id, keys, out, "Pull"));
  if (keys.empty()) return Status::Ok();
  Table& table = *tables_[table_id];
  std::vector<Key> unique = SortedUnique(keys);
  base::MutexLock lock(&table.mu);
  counters_.pulls.fetch_add(keys.size(), std::memory_order_relaxed);
  if (NeedsChunks(table, unique.size())) {
    return PullChunked(table, keys, unique, out, stream);
  }
  uint64_t brought_in = 0;
  STRATA_RETURN_IF_ERROR(MakeResident(table, unique, /*count_access=*/true, &brought_in));
  RunnerStaging& st = table.staging;
  STRATA_RETURN_IF_ERROR(StageKeys(table, keys, stream));
  STRATA_RETURN_IF_ERROR(ReserveRunner(st.flags, runner_, keys.size()));
  STRATA_RETURN_IF_ERROR(
      table.t0->FindAsync(st.keys.data(), keys.size(), out, st.flags.data(), stream));
  STRATA_RETURN_IF_ERROR(kernels::RunnerSync(runner_, stream));
  STRATA_RETURN_IF_ERROR(CheckAllFound(table, keys));
  return Touch(table, unique);
}

Status StoreImpl::Push(WorkerId worker, TableId table_id, std::span<const Key> keys,
                       const float* grads, void* stream) {
  STRATA_RETURN_IF_ERROR(CheckDataCall(worker, table_id, keys, grads, "Push"));
  if (keys.empty()) return Status::Ok();
  Table& table = *tables_[table_id];
  std::vector<Key> unique = SortedUnique(keys);
  base::MutexLock lock(&table.mu);
  counters_.pushes.fetch_add(keys.size(), std::memory_order_relaxed);
  if (NeedsChunks(table, unique.size())) {
    return PushChunked(table, keys, unique, grads, stream);
  }
  uint64_t brought_in = 0;
  STRATA_RETURN_IF_ERROR(MakeResident(table, unique, /*count_access=*/false, &brought_in));
  RunnerStaging& st = table.staging;
  STRATA_RETURN_IF_ERROR(StageKeys(table, keys, stream));
  STRATA_RETURN_IF_ERROR(table.t0->PushAsync(st.keys.data(), keys.size(), grads, stream));
  return kernels::RunnerSync(runner_, stream);
}

// Batches larger than T0's free share: chunks of unique keys, each made
// resident, read (or updated) and left to be evicted by the next chunk.
// Host staging, so it works the same for both runners.
Status StoreImpl::PullChunked(Table& table, std::span<const Key> keys,
                              std::span<const Key> unique_keys, float* out, void* stream) {
  const uint64_t room = PullRoom(table);
  if (room == 0) {
    return Status::ResourceExhausted("Pull on table '" + table.name +
                                     "': every T0 row is pinned by intents");
  }
  const uint64_t chunk_max = std::max<uint64_t>(1, std::min(room, kChunkKeysMax));
  std::unordered_map<Key, uint64_t> position;
  position.reserve(unique_keys.size());
  for (uint64_t i = 0; i < unique_keys.size(); ++i) position.emplace(unique_keys[i], i);
  std::vector<float> values(unique_keys.size() * table.dim);
  RunnerStaging& st = table.staging;
  for (uint64_t off = 0; off < unique_keys.size(); off += chunk_max) {
    std::span<const Key> chunk =
        unique_keys.subspan(off, std::min(chunk_max, unique_keys.size() - off));
    uint64_t brought_in = 0;
    STRATA_RETURN_IF_ERROR(MakeResident(table, chunk, /*count_access=*/true, &brought_in));
    STRATA_RETURN_IF_ERROR(StageKeys(table, chunk));
    STRATA_RETURN_IF_ERROR(ReserveRunner(st.values, runner_, chunk.size() * table.dim));
    STRATA_RETURN_IF_ERROR(ReserveRunner(st.flags, runner_, chunk.size()));
    STRATA_RETURN_IF_ERROR(
        table.t0->Find(st.keys.data(), chunk.size(), st.values.data(), st.flags.data()));
    STRATA_RETURN_IF_ERROR(CheckAllFound(table, chunk));
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopyOut(runner_, values.data() + off * table.dim,
                                                  st.values.data(),
                                                  chunk.size() * table.dim * sizeof(float)));
    STRATA_RETURN_IF_ERROR(Touch(table, chunk));
  }
  std::vector<float> host_out(keys.size() * table.dim);
  for (size_t i = 0; i < keys.size(); ++i) {
    std::memcpy(host_out.data() + i * table.dim, values.data() + position[keys[i]] * table.dim,
                table.dim * sizeof(float));
  }
  STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(runner_, out, host_out.data(),
                                               host_out.size() * sizeof(float), stream));
  return kernels::RunnerSync(runner_, stream);
}

Status StoreImpl::PushChunked(Table& table, std::span<const Key> keys,
                              std::span<const Key> unique_keys, const float* grads, void* stream) {
  const uint64_t room = PullRoom(table);
  if (room == 0) {
    return Status::ResourceExhausted("Push on table '" + table.name +
                                     "': every T0 row is pinned by intents");
  }
  const uint64_t chunk_max = std::max<uint64_t>(1, std::min(room, kChunkKeysMax));
  std::vector<float> host_grads(keys.size() * table.dim);
  STRATA_RETURN_IF_ERROR(kernels::RunnerCopyOut(runner_, host_grads.data(), grads,
                                                host_grads.size() * sizeof(float), stream));
  STRATA_RETURN_IF_ERROR(kernels::RunnerSync(runner_, stream));
  // Duplicates summed here, in key order; the table then sees unique keys.
  std::unordered_map<Key, uint64_t> position;
  position.reserve(unique_keys.size());
  for (uint64_t i = 0; i < unique_keys.size(); ++i) position.emplace(unique_keys[i], i);
  std::vector<float> summed(unique_keys.size() * table.dim, 0.0f);
  for (size_t i = 0; i < keys.size(); ++i) {
    float* dst = summed.data() + position[keys[i]] * table.dim;
    const float* src = host_grads.data() + i * table.dim;
    for (uint32_t d = 0; d < table.dim; ++d) dst[d] += src[d];
  }
  RunnerStaging& st = table.staging;
  for (uint64_t off = 0; off < unique_keys.size(); off += chunk_max) {
    std::span<const Key> chunk =
        unique_keys.subspan(off, std::min(chunk_max, unique_keys.size() - off));
    uint64_t brought_in = 0;
    // Once a chunk has been applied the Push cannot be undone, so a later
    // chunk's transient I/O error is retried here rather than returned (a
    // caller retrying the whole Push would apply the first chunks twice).
    Status resident = MakeResident(table, chunk, /*count_access=*/false, &brought_in);
    for (uint32_t attempt = 0; off > 0 && resident.IsIOError() && attempt < kPushRetriesMax;
         ++attempt) {
      resident = MakeResident(table, chunk, /*count_access=*/false, &brought_in);
    }
    if (!resident.ok() && off > 0) {
      return Status::Internal("Push on table '" + table.name + "' applied " + std::to_string(off) +
                              " of " + std::to_string(unique_keys.size()) +
                              " keys, then failed: " + resident.ToString());
    }
    STRATA_RETURN_IF_ERROR(resident);
    STRATA_RETURN_IF_ERROR(StageKeys(table, chunk));
    STRATA_RETURN_IF_ERROR(ReserveRunner(st.values, runner_, chunk.size() * table.dim));
    STRATA_RETURN_IF_ERROR(kernels::RunnerCopyIn(runner_, st.values.data(),
                                                 summed.data() + off * table.dim,
                                                 chunk.size() * table.dim * sizeof(float)));
    STRATA_RETURN_IF_ERROR(table.t0->Push(st.keys.data(), chunk.size(), st.values.data()));
  }
  return Status::Ok();
}

}  // namespace strata::engine
