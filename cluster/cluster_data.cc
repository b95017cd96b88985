// Pull and Push across ranks (docs/cluster.md, "The exchange").
//
// Both start alike: route this rank's keys (distinct, grouped by owner), then
// one all-to-all of a Header per rank pair (the local checks' code, the
// key count, table and worker) so every rank learns at once whether anyone's
// input was bad and how many keys it will receive, then one all-to-allv of
// the keys. Pull: each owner pulls the keys it received from its shard, the
// rows go back by a second all-to-allv and scatter into `out` in the
// caller's order. Push: the gradients of duplicates are summed before they
// travel, go to the owners in the same all-to-all shape, and each owner sums
// what the ranks sent for a key and pushes every key once. A cluster of one
// rank calls its shard directly (the MPI form). The NCCL form's device
// buffers take the same steps in cluster_device.cc. Keys, rows and gradients travel by Exchange
// (cluster_exchange.cc): one all-to-all when flat, along the topology's
// routes when two-phase; the headers always go straight.
#include <chrono>
#include <cstring>

#include "cluster/cluster_impl.h"
#include "engine/limits.h"

namespace strata::cluster {
uint64_t NanosSince(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count());
}

Status NotRetriable(const Status& served) {
  if (!served.IsIOError() && !served.IsResourceExhausted()) return served;
  // The other owners (and this one's earlier chunks) may have applied
  // their part: a retry of the whole Push would apply those twice, so
  // the error is not one a caller retries (not IOError).
  return Status::FailedPrecondition(
      "the owner's shard failed " + std::to_string(kOwnerAttemptsMax) + " attempts of its part (" +
      served.ToString() +
      "); other owners may have applied theirs, so this Push is partly applied and must not "
      "be retried");
}

uint64_t ClusterImpl::RemoteItems(std::span<const int> counts) const {
  uint64_t items = 0;
  for (int r = 0; r < world_size(); ++r) {
    if (r != rank()) items += counts[r];
  }
  return items;
}

void ClusterImpl::CountBytes(std::span<const int> sent, std::span<const int> received,
                             uint64_t item_bytes) {
  counters_.bytes_sent.fetch_add(RemoteItems(sent) * item_bytes, std::memory_order_relaxed);
  counters_.bytes_received.fetch_add(RemoteItems(received) * item_bytes, std::memory_order_relaxed);
}

Status ClusterImpl::ExchangeHeaders(const Status& local, WorkerId worker, TableId table,
                                    const char* what, std::vector<int>* recv_counts) {
  const int n = world_size();
  headers_out_.resize(n);
  headers_in_.resize(n);
  for (int r = 0; r < n; ++r) {
    headers_out_[r] = Header{static_cast<int32_t>(local.code()),
                             local.ok() ? router_.counts()[r] : 0, table, worker};
  }
  std::chrono::steady_clock::time_point start;
  STRATA_RETURN_IF_ERROR(BeginExchange(&start));
  STRATA_RETURN_IF_ERROR(comm_->AllToAll(headers_out_.data(), headers_in_.data(), sizeof(Header)));
  STRATA_RETURN_IF_ERROR(EndExchange(start));
  header_codes_.resize(n);
  for (int r = 0; r < n; ++r) header_codes_[r] = headers_in_[r].code;
  STRATA_RETURN_IF_ERROR(comm_->AgreeOnKnown(header_codes_, local));
  // Every rank sees every rank's table and worker, so all fail alike here.
  for (int r = 1; r < n; ++r) {
    const Header& h = headers_in_[r];
    if (h.table != headers_in_[0].table || h.worker != headers_in_[0].worker) {
      return Status::InvalidArgument(
          std::string(what) + ": rank " + std::to_string(r) + " names table " +
          std::to_string(h.table) + " and worker " + std::to_string(h.worker) + ", rank 0 table " +
          std::to_string(headers_in_[0].table) + " and worker " +
          std::to_string(headers_in_[0].worker) +
          ": a collective call names the same table and worker on every rank");
    }
  }
  recv_counts->resize(n);
  for (int r = 0; r < n; ++r) (*recv_counts)[r] = headers_in_[r].count;
  return Status::Ok();
}

Status ClusterImpl::SendKeys(std::span<const int> recv_counts) {
  uint64_t total = 0;
  for (int c : recv_counts) total += c;
  recv_keys_.resize(total);
  counters_.keys_sent.fetch_add(RemoteItems(router_.counts()), std::memory_order_relaxed);
  counters_.keys_served.fetch_add(RemoteItems(recv_counts), std::memory_order_relaxed);
  CountBytes(router_.counts(), recv_counts, sizeof(Key));
  std::chrono::steady_clock::time_point start;
  STRATA_RETURN_IF_ERROR(BeginExchange(&start));
  if (comm_->data_on_device()) {
    STRATA_RETURN_IF_ERROR(ExchangeHostBuffers(router_.grouped().data(), router_.counts(),
                                               recv_keys_.data(), recv_counts, sizeof(Key)));
  } else {
    STRATA_RETURN_IF_ERROR(Exchange(router_.grouped().data(), router_.counts(), recv_keys_.data(),
                                    recv_counts, sizeof(Key)));
  }
  STRATA_RETURN_IF_ERROR(EndExchange(start));
  return Status::Ok();
}

Status ClusterImpl::BeginExchange(std::chrono::steady_clock::time_point* start) {
  if (options_.align_exchanges) {
    const auto wait = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(comm_->Barrier());
    counters_.align_wait_ns.fetch_add(NanosSince(wait), std::memory_order_relaxed);
  }
  *start = std::chrono::steady_clock::now();
  return Status::Ok();
}

Status ClusterImpl::EndExchange(std::chrono::steady_clock::time_point start) {
  counters_.exchange_ns.fetch_add(NanosSince(start), std::memory_order_relaxed);
  counters_.exchange_calls.fetch_add(1, std::memory_order_relaxed);
  if (!options_.align_exchanges) return Status::Ok();
  const auto wait = std::chrono::steady_clock::now();
  STRATA_RETURN_IF_ERROR(comm_->Barrier());
  counters_.align_wait_ns.fetch_add(NanosSince(wait), std::memory_order_relaxed);
  return Status::Ok();
}

Status ClusterImpl::RouteAndSendKeys(const Status& local, WorkerId worker, TableId table,
                                     std::span<const Key> keys, std::vector<int>* recv_counts) {
  if (local.ok()) router_.Route(table, keys, static_cast<uint32_t>(world_size()));
  STRATA_RETURN_IF_ERROR(ExchangeHeaders(local, worker, table, "Cluster::Pull", recv_counts));
  return SendKeys(*recv_counts);
}

Status ClusterImpl::Pull(WorkerId worker, TableId table, std::span<const Key> keys, float* out,
                         void* stream) {
  base::MutexLock lock(&collective_mu_);
  const Status local = CheckCall(worker, table, keys, out, "Cluster::Pull");
  if (comm_->data_on_device()) {
    comm_->UseStream(stream);
    Status s = PullOnDevice(local, worker, table, keys, out);
    comm_->UseOwnStream();
    return s;
  }
  // One rank: nothing to exchange, the shard is the store (AgreeOn still
  // names rank 0 in a refusal, as at any size).
  if (world_size() == 1) {
    STRATA_RETURN_IF_ERROR(comm_->AgreeOn(local));
    counters_.pull_calls.fetch_add(1, std::memory_order_relaxed);
    return ServeRetried([&] { return shard_->Pull(worker, table, keys, out); });
  }
  std::vector<int>& recv_counts = recv_counts_;
  STRATA_RETURN_IF_ERROR(RouteAndSendKeys(local, worker, table, keys, &recv_counts));

  // The owner's part: every key the ranks asked for, in chunks the shard takes.
  const uint32_t dim = tables_[table].dim;
  owner_rows_.resize(recv_keys_.size() * dim);
  Status served = Status::Ok();
  for (size_t at = 0; at < recv_keys_.size() && served.ok(); at += engine::kBatchKeysMax) {
    const size_t n = std::min<size_t>(engine::kBatchKeysMax, recv_keys_.size() - at);
    // The part's buffers outside the lambda, which the lock analysis
    // does not see into.
    const std::span<const Key> part = std::span<const Key>(recv_keys_).subspan(at, n);
    float* rows = owner_rows_.data() + at * dim;
    served = ServeRetried([&] { return shard_->Pull(worker, table, part, rows); });
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(served.WithContext("Cluster::Pull: the owner's shard")));

  batch_rows_.resize(router_.grouped().size() * dim);
  CountBytes(recv_counts, router_.counts(), dim * sizeof(float));
  std::chrono::steady_clock::time_point start;
  STRATA_RETURN_IF_ERROR(BeginExchange(&start));
  STRATA_RETURN_IF_ERROR(Exchange(owner_rows_.data(), recv_counts, batch_rows_.data(),
                                  router_.counts(), dim * sizeof(float)));
  STRATA_RETURN_IF_ERROR(EndExchange(start));
  const std::span<const uint32_t> slots = router_.slots();
  for (size_t i = 0; i < keys.size(); ++i) {
    std::memcpy(out + i * dim, batch_rows_.data() + uint64_t{slots[i]} * dim, dim * sizeof(float));
  }
  counters_.pull_calls.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status ClusterImpl::Push(WorkerId worker, TableId table, std::span<const Key> keys,
                         const float* grads, void* stream) {
  base::MutexLock lock(&collective_mu_);
  const Status local = CheckCall(worker, table, keys, grads, "Cluster::Push");
  if (comm_->data_on_device()) {
    comm_->UseStream(stream);
    Status s = PushOnDevice(local, worker, table, keys, grads);
    comm_->UseOwnStream();
    return s;
  }
  if (world_size() == 1) {
    STRATA_RETURN_IF_ERROR(comm_->AgreeOn(local));
    counters_.push_calls.fetch_add(1, std::memory_order_relaxed);
    return ServeRetried([&] { return shard_->Push(worker, table, keys, grads); });
  }
  // Keys and summed gradients travel together, one item per distinct key:
  // the key's 8 bytes (as two floats) then its `dim` floats. One all-to-all
  // after the headers instead of one for the keys and one for the rows.
  const uint32_t dim = local.ok() ? tables_[table].dim : 0;
  const size_t stride = kKeyFloats + dim;
  if (local.ok()) {
    router_.Route(table, keys, static_cast<uint32_t>(world_size()));
    const std::span<const Key> grouped = router_.grouped();
    batch_rows_.assign(grouped.size() * stride, 0.0f);
    for (size_t u = 0; u < grouped.size(); ++u) {
      std::memcpy(batch_rows_.data() + u * stride, &grouped[u], sizeof(Key));
    }
    const std::span<const uint32_t> slots = router_.slots();
    for (size_t i = 0; i < keys.size(); ++i) {
      float* sum = batch_rows_.data() + uint64_t{slots[i]} * stride + kKeyFloats;
      const float* g = grads + i * dim;
      for (uint32_t d = 0; d < dim; ++d) sum[d] += g[d];
    }
  }
  std::vector<int>& recv_counts = recv_counts_;
  STRATA_RETURN_IF_ERROR(ExchangeHeaders(local, worker, table, "Cluster::Push", &recv_counts));
  uint64_t total = 0;
  for (int c : recv_counts) total += c;
  owner_rows_.resize(total * stride);
  counters_.keys_sent.fetch_add(RemoteItems(router_.counts()), std::memory_order_relaxed);
  counters_.keys_served.fetch_add(RemoteItems(recv_counts), std::memory_order_relaxed);
  CountBytes(router_.counts(), recv_counts, stride * sizeof(float));
  std::chrono::steady_clock::time_point start;
  STRATA_RETURN_IF_ERROR(BeginExchange(&start));
  STRATA_RETURN_IF_ERROR(Exchange(batch_rows_.data(), router_.counts(), owner_rows_.data(),
                                  recv_counts, stride * sizeof(float)));
  STRATA_RETURN_IF_ERROR(EndExchange(start));

  // The owner's part: sum what several ranks sent for one key, so each key is
  // pushed once even when the keys take several shard calls.
  recv_keys_.resize(total);
  for (size_t i = 0; i < total; ++i) {
    std::memcpy(&recv_keys_[i], owner_rows_.data() + i * stride, sizeof(Key));
  }
  owner_router_.Route(table, recv_keys_, 1);
  owner_sums_.assign(owner_router_.grouped().size() * dim, 0.0f);
  const std::span<const uint32_t> slots = owner_router_.slots();
  for (size_t i = 0; i < total; ++i) {
    float* sum = owner_sums_.data() + uint64_t{slots[i]} * dim;
    const float* g = owner_rows_.data() + i * stride + kKeyFloats;
    for (uint32_t d = 0; d < dim; ++d) sum[d] += g[d];
  }
  const std::span<const Key> unique = owner_router_.grouped();
  Status served = Status::Ok();
  for (size_t at = 0; at < unique.size() && served.ok(); at += engine::kBatchKeysMax) {
    const size_t n = std::min<size_t>(engine::kBatchKeysMax, unique.size() - at);
    const std::span<const Key> part = unique.subspan(at, n);
    const float* sums = owner_sums_.data() + at * dim;
    served = NotRetriable(ServeRetried([&] { return shard_->Push(worker, table, part, sums); }));
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(served.WithContext("Cluster::Push: the owner's shard")));
  counters_.push_calls.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

}  // namespace strata::cluster
