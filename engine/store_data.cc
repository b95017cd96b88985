// The foreground data path: Pull and Push.
//
// A Pull takes its table's lock and makes one pass over T0
// (DeviceTable::FindTouch): each resident key's embedding goes to its row of
// `out` and its next use is refreshed, and the keys T0 lacks are counted.
// With none missing that is the whole Pull: one pass, one synchronization.
// Otherwise only the missing keys take the slow path (PullMisses): their
// distinct keys are brought into T0 (MakeResident, store_tiers.cc: T1, else
// T2, else the initializer; counted as stalls) and a second pass over just
// those keys fills their rows of `out`.
//
// A Push first scans its gradients for NaN and infinity (counted; refused
// with TableOptions::refuse_nonfinite_grads), then is one T0 pass
// (DeviceTable::Push: repeats summed, one optimizer step per distinct key). If some key is not
// resident the table applies nothing; the missing keys are brought in and the Push runs again.
//
// Batches larger than a T0 call takes, or whose missing keys outnumber T0's
// free room, are done in chunks through host staging. A chunked Push that
// fails after its first chunk stays applied in part; the worker remembers
// how far, and a retry of the same Push applies only the rest
// (store_push_retry.cc).
#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "engine/store_impl.h"

namespace strata::engine {

// The rows a batch of this table may have resident at once: what neither its
// own slots' bound nor T0 as a whole has pinned for intents.
uint64_t StoreImpl::PullRoom(const Table& table) const {
  const uint64_t own = table.t0_rows_cap;
  const uint64_t own_pins = table.intent_pinned.load(std::memory_order_relaxed);
  const uint64_t all = options_.device_rows_max;
  const uint64_t all_pins = T0IntentPins();
  return std::min(own - std::min(own, own_pins), all - std::min(all, all_pins));
}

// The next uses a pass gives the batch: one value for all when no key can
// differ (LRU fallback, no intents tracked), else one per key. With the LFU
// fallback the keys are counted in the frequency sketch first.
Result<std::span<const int64_t>> StoreImpl::PassNextUses(Table& table, std::span<const Key> keys,
                                                         int64_t* all) {
  CountAccess(table, keys);
  if (!fallback_.sketch && tracked_keys_.load(std::memory_order_acquire) == 0) {
    const uint64_t seq = fallback_.access_seq.fetch_add(1, std::memory_order_relaxed) + 1;
    *all = FallbackValue(0, seq);
    return std::span<const int64_t>();
  }
  STRATA_RETURN_IF_ERROR(NextUses(table, keys, &table.next_use));
  *all = kClockNever;
  return std::span<const int64_t>(table.next_use);
}

// The slow path of Pull and Push: brings the missing keys the tier listed
// (CollectMisses) into T0 with the batch's resident rows pinned, so that
// afterwards every key of the batch is resident. false, and nothing done,
// when the batch's distinct keys exceed T0's free room: the caller takes
// chunks.
Result<bool> StoreImpl::BringInMisses(Table& table, std::span<const Key> keys, bool count_access) {
  table.dedup.Distinct(keys, &table.batch_unique);
  if (table.batch_unique.size() > PullRoom(table)) return false;
  STRATA_RETURN_IF_ERROR(table.t0->Pin(table.batch_unique, true));  // missing keys take no pin
  uint64_t brought_in = 0;
  Status resident = MakeResident(table, table.t0->missing_keys(), count_access, &brought_in);
  // Unpinned whatever MakeResident returned; its error comes first.
  Status unpinned = table.t0->Pin(table.batch_unique, false);
  STRATA_RETURN_IF_ERROR(resident);
  STRATA_RETURN_IF_ERROR(unpinned);
  return true;
}

Status StoreImpl::Pull(WorkerId worker, TableId table_id, std::span<const Key> keys, float* out,
                       void* stream) {
  CallScope call(this);
  STRATA_RETURN_IF_ERROR(call.status());
  STRATA_RETURN_IF_ERROR(CheckDataCall(worker, table_id, keys, out, "Pull"));
  if (keys.empty()) return Status::Ok();
  STRATA_RETURN_IF_ERROR(ApplyWaitingIntents());
  Table& table = *tables_[table_id];
  base::MutexLock lock(&table.mu);
  counters_.pulls.fetch_add(keys.size(), std::memory_order_relaxed);
  if (keys.size() > table.t0->batch_keys_max()) {
    table.dedup.Distinct(keys, &table.batch_unique);
    return PullChunked(table, keys, table.batch_unique, out, /*first_pass=*/true, stream);
  }
  int64_t next_use_all = kClockNever;
  std::span<const int64_t> next_use;
  STRATA_ASSIGN_OR_RETURN(next_use, PassNextUses(table, keys, &next_use_all));
  uint64_t missing = 0;
  STRATA_RETURN_IF_ERROR(table.t0->Touch(keys, next_use, next_use_all, out, stream, &missing));
  counters_.t0_hits.fetch_add(keys.size() - missing, std::memory_order_relaxed);
  counters_.t0_misses.fetch_add(missing, std::memory_order_relaxed);
  if (missing == 0) return Status::Ok();
  return PullMisses(table, keys, next_use, next_use_all, out, stream);
}

// The slow path of a Pull whose pass found keys missing: their distinct keys
// are brought into T0, then a second pass fills their rows of `out` (rows
// gathered by the first pass may be evicted meanwhile: they were read).
Status StoreImpl::PullMisses(Table& table, std::span<const Key> keys,
                             std::span<const int64_t> next_use, int64_t next_use_all, float* out,
                             void* stream) {
  STRATA_RETURN_IF_ERROR(table.t0->CollectMisses(keys, next_use, next_use_all));
  bool brought = false;
  STRATA_ASSIGN_OR_RETURN(brought, BringInMisses(table, keys, /*count_access=*/true));
  if (!brought) {
    // BringInMisses left the batch's distinct keys in table.batch_unique.
    // The pass counted the lookups and the accesses already.
    return PullChunked(table, keys, table.batch_unique, out, /*first_pass=*/false, stream);
  }
  uint64_t still_missing = 0;
  STRATA_RETURN_IF_ERROR(table.t0->TouchMisses(out, stream, &still_missing));
  if (still_missing != 0) {
    // A key made resident must be found; a miss here would hand the caller a
    // row it never got, so it is an error, never silent.
    return Status::Internal("table '" + table.name + "': " + std::to_string(still_missing) +
                            " keys missing from T0 right after they were made resident");
  }
  return Status::Ok();
}

Status StoreImpl::CheckGradients(const Table& table, std::span<const Key> keys, const float* grads,
                                 void* stream) {
  uint64_t rows = 0, first = 0;
  STRATA_RETURN_IF_ERROR(table.t0->FindNonFinite(grads, keys.size(), stream, &rows, &first));
  if (rows == 0) return Status::Ok();
  counters_.nonfinite_grads.fetch_add(rows, std::memory_order_relaxed);
  if (!table_options_[table.id].refuse_nonfinite_grads) return Status::Ok();
  return Status::InvalidArgument(
      "Push on table '" + table.name + "': the gradient of key " + std::to_string(keys[first]) +
      " (position " + std::to_string(first) + ") holds a NaN or an infinity, as do " +
      std::to_string(rows) + " of the " + std::to_string(keys.size()) +
      " keys' gradients; nothing applied (TableOptions::refuse_nonfinite_grads)");
}

Status StoreImpl::Push(WorkerId worker, TableId table_id, std::span<const Key> keys,
                       const float* grads, void* stream) {
  CallScope call(this);
  STRATA_RETURN_IF_ERROR(call.status());
  STRATA_RETURN_IF_ERROR(CheckDataCall(worker, table_id, keys, grads, "Push"));
  if (keys.empty()) return Status::Ok();
  Table& table = *tables_[table_id];
  Worker& w = *workers_.slots[worker];
  base::MutexLock lock(&table.mu);
  counters_.pushes.fetch_add(keys.size(), std::memory_order_relaxed);
  STRATA_RETURN_IF_ERROR(CheckGradients(table, keys, grads, stream));
  // A retry of a chunked Push that failed part-way takes the chunked path
  // whatever T0's room is now, so that it skips what was applied.
  const bool may_resume = PushMayResume(w, table_id, keys.size());
  if (may_resume || keys.size() > table.t0->batch_keys_max()) {
    table.dedup.Distinct(keys, &table.batch_unique);
    return PushChunked(table, w, keys, table.batch_unique, grads, may_resume, stream);
  }
  Status pushed = table.t0->Push(keys, grads, stream);
  if (!pushed.IsNotFound()) return pushed;

  // Some key is not resident and nothing was applied: bring the missing keys
  // in and push again. A failure up to that second Push applied nothing.
  STRATA_RETURN_IF_ERROR(table.t0->FindPresence(keys));
  STRATA_RETURN_IF_ERROR(table.t0->CollectMisses(keys));
  bool brought = false;
  STRATA_ASSIGN_OR_RETURN(brought, BringInMisses(table, keys, /*count_access=*/false));
  if (!brought) {
    return PushChunked(table, w, keys, table.batch_unique, grads, /*may_resume=*/false, stream);
  }
  return table.t0->Push(keys, grads, stream);
}

// Batches larger than T0's free share: chunks of unique keys, each made
// resident, read (or updated) and left to be evicted by the next chunk.
// Host staging, so it works the same for both runners. `first_pass`: no
// pass over T0 ran for this Pull, so the chunks count its lookups and (LFU)
// its accesses; after a pass they were counted there.
Status StoreImpl::PullChunked(Table& table, std::span<const Key> keys,
                              std::span<const Key> unique_keys, float* out, bool first_pass,
                              void* stream) {
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
  std::vector<uint8_t> found;
  uint64_t brought_in_total = 0;
  for (uint64_t off = 0; off < unique_keys.size(); off += chunk_max) {
    std::span<const Key> chunk =
        unique_keys.subspan(off, std::min(chunk_max, unique_keys.size() - off));
    uint64_t brought_in = 0;
    STRATA_RETURN_IF_ERROR(MakeResident(table, chunk, /*count_access=*/true, &brought_in));
    brought_in_total += brought_in;
    STRATA_RETURN_IF_ERROR(table.t0->Gather(chunk, values.data() + off * table.dim, &found));
    for (size_t i = 0; i < chunk.size(); ++i) {
      if (found[i] == 0) {
        return Status::Internal("table '" + table.name + "': key " + std::to_string(chunk[i]) +
                                " missing from T0 right after it was made resident");
      }
    }
    if (first_pass) CountAccess(table, chunk);
    STRATA_RETURN_IF_ERROR(RefreshNextUse(table, chunk, /*with_t1=*/false));
  }
  if (first_pass) {
    // Lookups here are distinct keys fetched (misses) and the rest (hits).
    counters_.t0_misses.fetch_add(brought_in_total, std::memory_order_relaxed);
    counters_.t0_hits.fetch_add(keys.size() - brought_in_total, std::memory_order_relaxed);
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

// A chunk applied cannot be undone (its rows may have left T0 since), so a
// failure after the first is remembered for the worker: a retry of the same
// Push resumes after the distinct keys applied (store_push_retry.cc).
Status StoreImpl::PushChunked(Table& table, Worker& worker, std::span<const Key> keys,
                              std::span<const Key> unique_keys, const float* grads, bool may_resume,
                              void* stream) {
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
  std::optional<PartialPush> call;
  uint64_t start = 0;
  if (may_resume) {
    call = DescribePush(table.id, keys, host_grads, unique_keys.size());
    start = AppliedBefore(worker, *call);
  }
  // Duplicates summed here, in batch order; the table then sees distinct keys.
  std::unordered_map<Key, uint64_t> position;
  position.reserve(unique_keys.size());
  for (uint64_t i = 0; i < unique_keys.size(); ++i) position.emplace(unique_keys[i], i);
  std::vector<float> summed(unique_keys.size() * table.dim, 0.0f);
  for (size_t i = 0; i < keys.size(); ++i) {
    float* dst = summed.data() + position[keys[i]] * table.dim;
    const float* src = host_grads.data() + i * table.dim;
    for (uint32_t d = 0; d < table.dim; ++d) dst[d] += src[d];
  }
  for (uint64_t off = start; off < unique_keys.size(); off += chunk_max) {
    std::span<const Key> chunk =
        unique_keys.subspan(off, std::min(chunk_max, unique_keys.size() - off));
    uint64_t brought_in = 0;
    Status applied = MakeResident(table, chunk, /*count_access=*/false, &brought_in);
    if (applied.ok()) applied = table.t0->PushHost(chunk, summed.data() + off * table.dim);
    if (applied.ok()) continue;
    if (off == 0) return applied;  // nothing applied
    if (!call) call = DescribePush(table.id, keys, host_grads, unique_keys.size());
    return RememberPartialPush(worker, table, *call, off, applied);
  }
  if (start > 0) ForgetPartialPush(worker);
  return Status::Ok();
}

}  // namespace strata::engine
