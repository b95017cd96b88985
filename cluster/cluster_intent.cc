// Intents across ranks: Intent queues keys per owner without any
// communication; AdvanceClock and DrainIntents deliver every queued intent
// in one exchange (an all-to-all of counts, an all-to-allv of records), and
// each owner hands them to its shard's Store::Intent, whose planner then
// prefetches them like local intents.
//
// A record, in uint64 words: worker, table, start, end, count, then `count`
// keys (Clock values travel as their two's-complement bits).
#include "base/assert.h"
#include "cluster/cluster_impl.h"
#include "engine/limits.h"

namespace strata::cluster {
namespace {

constexpr size_t kRecordWords = 5;  // before the keys

}  // namespace

Status ClusterImpl::Intent(WorkerId worker, TableId table, std::span<const Key> keys, Clock start,
                           Clock end) {
  STRATA_RETURN_IF_ERROR(CheckCall(worker, table, keys, keys.data(), "Cluster::Intent"));
  if (start >= end) {
    return Status::InvalidArgument("Cluster::Intent: window [" + std::to_string(start) + ", " +
                                   std::to_string(end) + ") is empty");
  }
  if (keys.empty()) return Status::Ok();
  const uint32_t n = static_cast<uint32_t>(world_size());
  base::MutexLock lock(&intent_mu_);
  uint64_t queued = 0;
  for (const OwnerQueue& q : queues_) queued += q.keys.size();
  if (queued + keys.size() > engine::kInboxKeysMax) {
    return Status::ResourceExhausted("Cluster::Intent: " + std::to_string(queued) +
                                     " intent keys queued already; AdvanceClock or DrainIntents "
                                     "delivers them");
  }
  // One record per owner that gets keys: opened on its first key.
  std::vector<int64_t> record_of(n, -1);
  for (Key key : keys) {
    const uint32_t owner = ClusterOwner(table, key, n);
    OwnerQueue& q = queues_[owner];
    if (record_of[owner] < 0) {
      record_of[owner] = static_cast<int64_t>(q.intents.size());
      q.intents.push_back(QueuedIntent{worker, table, start, end, 0});
    }
    ++q.intents[record_of[owner]].count;
    q.keys.push_back(key);
  }
  return Status::Ok();
}

Status ClusterImpl::DeliverIntents() {
  const int n = world_size();
  std::vector<int> send_counts(n, 0);
  std::vector<uint64_t> send;
  {
    base::MutexLock lock(&intent_mu_);
    for (int r = 0; r < n; ++r) {
      OwnerQueue& q = queues_[r];
      const size_t before = send.size();
      size_t key_at = 0;
      for (const QueuedIntent& in : q.intents) {
        send.push_back(in.worker);
        send.push_back(in.table);
        send.push_back(static_cast<uint64_t>(in.start));
        send.push_back(static_cast<uint64_t>(in.end));
        send.push_back(in.count);
        send.insert(send.end(), q.keys.begin() + key_at, q.keys.begin() + key_at + in.count);
        key_at += in.count;
      }
      send_counts[r] = static_cast<int>(send.size() - before);
      if (r != rank()) counters_.intents_sent.fetch_add(q.keys.size(), std::memory_order_relaxed);
      q.intents.clear();
      q.keys.clear();
    }
  }
  std::vector<uint64_t> recv;
  if (n == 1 && !comm_->data_on_device()) {  // one MPI rank: its own intents, no exchange
    recv = std::move(send);
  } else {
    std::vector<int> recv_counts(n, 0);
    STRATA_RETURN_IF_ERROR(
        comm_->AllToAll(send_counts.data(), recv_counts.data(), sizeof(send_counts[0])));
    uint64_t total = 0;
    for (int c : recv_counts) total += c;
    recv.resize(total);
    CountBytes(send_counts, recv_counts, sizeof(uint64_t));
    STRATA_RETURN_IF_ERROR(
        ExchangeHostBuffers(send.data(), send_counts, recv.data(), recv_counts, sizeof(uint64_t)));
  }
  // The owner's part: the records, each a Store::Intent on the shard.
  Status local = Status::Ok();
  size_t at = 0;
  while (at < recv.size() && local.ok()) {
    STRATA_ASSERT(recv.size() - at >= kRecordWords, "Cluster: a truncated intent record");
    const uint64_t count = recv[at + 4];
    STRATA_ASSERT(recv.size() - at - kRecordWords >= count, "Cluster: a truncated intent record");
    const std::span<const Key> keys(recv.data() + at + kRecordWords, count);
    local =
        shard_->Intent(static_cast<WorkerId>(recv[at]), static_cast<TableId>(recv[at + 1]), keys,
                       static_cast<Clock>(recv[at + 2]), static_cast<Clock>(recv[at + 3]));
    at += kRecordWords + count;
  }
  return comm_->AgreeOn(local.WithContext("Cluster: delivering intents to the owner's shard"));
}

Status ClusterImpl::AdvanceClock(WorkerId worker) {
  base::MutexLock lock(&collective_mu_);
  Status local = CheckOpen();
  const uint32_t workers = workers_.load(std::memory_order_acquire);
  if (local.ok() && worker >= workers) {
    local = Status::InvalidArgument("Cluster::AdvanceClock: worker " + std::to_string(worker) +
                                    " is not registered (" + std::to_string(workers) + " are)");
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(local));
  STRATA_RETURN_IF_ERROR(DeliverIntents());
  return shard_->AdvanceClock(worker);
}

Status ClusterImpl::DrainIntents() {
  base::MutexLock lock(&collective_mu_);
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(CheckOpen()));
  STRATA_RETURN_IF_ERROR(DeliverIntents());
  return comm_->AgreeOn(shard_->DrainIntents().WithContext("Cluster::DrainIntents"));
}

}  // namespace strata::cluster
