// The foreground data path: Pull and Push.
//
// A Pull or Push takes its table's lock, brings the batch's unique keys into
// T0 (MakeResident, store_tiers.cc: a miss is fetched synchronously and
// counted as a stall), then runs one T0 operation on the whole batch and,
// for a Pull, refreshes the rows' next uses. A batch with more unique keys
// than T0 has room for is done in chunks through host staging.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "engine/store_impl.h"

namespace strata::engine {
namespace {

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
