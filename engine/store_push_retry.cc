// A chunked Push that failed part-way, and its retry.
//
// A Push larger than T0's free room is applied in chunks of its distinct keys
// (PushChunked, store_data.cc); each chunk is made resident, which may read
// rows from the SSD and write dirty ones down, and then updated. Once a
// chunk is applied it cannot be undone: its rows may already have left T0,
// and putting the old values back would need the very I/O that just failed.
// So when a later chunk fails, the worker remembers the call (its table,
// XXH3-128 hashes of its keys and of its gradients, and how many of its
// distinct keys were applied, in KeyDedup's first-occurrence order, which
// the same keys always give) and the error says so. A retry of the same
// Push by the same worker applies only the distinct keys after that prefix;
// the worker's next other Push, or its AdvanceClock, forgets the record.
// Checkpoint refuses while any worker holds one, so no checkpoint holds half
// a Push.
#include <xxhash.h>

#include "base/assert.h"
#include "engine/store_impl.h"

namespace strata::engine {
namespace {

std::array<uint64_t, 2> Hash128(const void* data, size_t bytes) {
  const XXH128_hash_t h = XXH3_128bits(data, bytes);
  return {h.low64, h.high64};
}

}  // namespace

bool StoreImpl::PushMayResume(Worker& worker, TableId table, uint64_t keys) {
  if (!worker.has_partial_push.load(std::memory_order_acquire)) return false;
  base::MutexLock lock(&worker.push_mu);
  if (worker.partial_push && worker.partial_push->table == table &&
      worker.partial_push->keys == keys) {
    return true;
  }
  worker.partial_push.reset();
  worker.has_partial_push.store(false, std::memory_order_release);
  return false;
}

StoreImpl::PartialPush StoreImpl::DescribePush(TableId table, std::span<const Key> keys,
                                               std::span<const float> grads, uint64_t distinct) {
  PartialPush call;
  call.table = table;
  call.keys = keys.size();
  call.keys_hash = Hash128(keys.data(), keys.size_bytes());
  call.grads_hash = Hash128(grads.data(), grads.size_bytes());
  call.distinct = distinct;
  return call;
}

uint64_t StoreImpl::AppliedBefore(Worker& worker, const PartialPush& call) {
  base::MutexLock lock(&worker.push_mu);
  if (!worker.partial_push) return 0;
  const PartialPush& p = *worker.partial_push;
  if (p.table == call.table && p.keys == call.keys && p.keys_hash == call.keys_hash &&
      p.grads_hash == call.grads_hash && p.distinct == call.distinct) {
    STRATA_ASSERT(p.applied < p.distinct, "a partial Push applied all its keys");
    return p.applied;
  }
  worker.partial_push.reset();
  worker.has_partial_push.store(false, std::memory_order_release);
  return 0;
}

Status StoreImpl::RememberPartialPush(Worker& worker, const Table& table, PartialPush call,
                                      uint64_t applied, const Status& failure) {
  STRATA_ASSERT(applied > 0 && applied < call.distinct, "a partial Push applies some keys");
  const uint64_t distinct = call.distinct;
  call.applied = applied;
  {
    base::MutexLock lock(&worker.push_mu);
    worker.partial_push = call;
    worker.has_partial_push.store(true, std::memory_order_release);
  }
  return failure.WithContext("Push on table '" + table.name + "' applied " +
                             std::to_string(applied) + " of its " + std::to_string(distinct) +
                             " distinct keys, then failed; retrying the same Push (same worker, "
                             "keys and gradients) applies only the other " +
                             std::to_string(distinct - applied));
}

void StoreImpl::ForgetPartialPush(Worker& worker) {
  if (!worker.has_partial_push.load(std::memory_order_acquire)) return;
  base::MutexLock lock(&worker.push_mu);
  worker.partial_push.reset();
  worker.has_partial_push.store(false, std::memory_order_release);
}

Status StoreImpl::CheckNoPartialPush() const {
  const uint32_t n = workers_.count.load(std::memory_order_acquire);
  for (uint32_t w = 0; w < n; ++w) {
    Worker& worker = *workers_.slots[w];
    if (!worker.has_partial_push.load(std::memory_order_acquire)) continue;
    base::MutexLock lock(&worker.push_mu);
    if (!worker.partial_push) continue;
    const PartialPush& p = *worker.partial_push;
    return Status::FailedPrecondition(
        "Checkpoint: worker " + std::to_string(w) + "'s Push on table '" + tables_[p.table]->name +
        "' applied " + std::to_string(p.applied) + " of its " + std::to_string(p.distinct) +
        " distinct keys and failed; retry it (it applies only the rest), push something else or "
        "advance the worker's clock first, so that no checkpoint holds half a Push");
  }
  return Status::Ok();
}

}  // namespace strata::engine
