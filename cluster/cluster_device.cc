// The NCCL form's Pull and Push (docs/cluster.md, "The NCCL form"): the
// steps of cluster_data.cc with the rows and gradients in device memory, on
// the caller's stream (comm_->stream()). Routing and the owners' key lists
// stay host work, as a Store takes host keys: the keys go to the device only
// to travel. Pull: the owners pull into device memory, the rows travel by
// grouped ncclSend/ncclRecv and a kernel scatters them into `out` in the
// caller's order. Push: a kernel sums the gradients of each distinct key (in
// the caller's order, as the MPI form's loop does), they travel, and the
// owner sums what the ranks sent for a key, also on the device, before its
// shard's Push. Unlike the MPI form, a cluster of one rank takes the same
// steps (sending to itself), so a one-GPU run checks the whole path.
//
// A shard whose T0 is in host memory (StoreOptions::use_gpu false, or no
// GPU for the shard) is served through host copies of its rows.
#include "cluster/cluster_impl.h"
#include "engine/limits.h"
#include "kernels/gpu_runtime.h"
#include "kernels/row_ops.h"

namespace strata::cluster {

using kernels::detail::GpuCopy;
using kernels::detail::GpuCopyKind;
using kernels::detail::GpuSync;

Status ClusterImpl::KeysOnHost(const Status& checked, std::span<const Key>* keys) {
  if (!checked.ok() || keys->empty() || !kernels::detail::GpuIsDeviceMemory(keys->data())) {
    return checked;
  }
  host_keys_.resize(keys->size());
  STRATA_RETURN_IF_ERROR(GpuCopy(host_keys_.data(), keys->data(), keys->size_bytes(),
                                 GpuCopyKind::kDeviceToHost, comm_->stream()));
  STRATA_RETURN_IF_ERROR(GpuSync(comm_->stream()));
  *keys = host_keys_;
  return Status::Ok();
}

Status ClusterImpl::ExchangeHostBuffers(const void* send, std::span<const int> send_counts,
                                        void* recv, std::span<const int> recv_counts,
                                        size_t item_bytes) {
  if (!comm_->data_on_device()) {
    return comm_->AllToAllv(send, send_counts, recv, recv_counts, item_bytes);
  }
  uint64_t send_bytes = 0;
  uint64_t recv_bytes = 0;
  for (int c : send_counts) send_bytes += static_cast<uint64_t>(c) * item_bytes;
  for (int c : recv_counts) recv_bytes += static_cast<uint64_t>(c) * item_bytes;
  void* stream = comm_->stream();
  STRATA_RETURN_IF_ERROR(device_keys_out_.Reserve(send_bytes));
  STRATA_RETURN_IF_ERROR(device_keys_in_.Reserve(recv_bytes));
  STRATA_RETURN_IF_ERROR(
      GpuCopy(device_keys_out_.as<void>(), send, send_bytes, GpuCopyKind::kHostToDevice, stream));
  STRATA_RETURN_IF_ERROR(comm_->AllToAllv(device_keys_out_.as<void>(), send_counts,
                                          device_keys_in_.as<void>(), recv_counts, item_bytes));
  STRATA_RETURN_IF_ERROR(
      GpuCopy(recv, device_keys_in_.as<void>(), recv_bytes, GpuCopyKind::kDeviceToHost, stream));
  return GpuSync(stream);
}

Status ClusterImpl::UploadGroups(std::span<const uint32_t> slots, size_t groups) {
  // A counting sort by slot, stable: each group's rows in ascending order.
  const size_t n = slots.size();
  index_.assign(n + groups + 1, 0);
  uint32_t* order = index_.data();
  uint32_t* starts = index_.data() + n;
  for (uint32_t s : slots) ++starts[s + 1];
  for (size_t g = 0; g < groups; ++g) starts[g + 1] += starts[g];
  for (size_t i = 0; i < n; ++i) order[starts[slots[i]]++] = static_cast<uint32_t>(i);
  // Each start has moved to the next group's: move them back.
  for (size_t g = groups; g > 0; --g) starts[g] = starts[g - 1];
  starts[0] = 0;
  const size_t bytes = index_.size() * sizeof(uint32_t);
  STRATA_RETURN_IF_ERROR(device_index_.Reserve(bytes));
  return GpuCopy(device_index_.as<void>(), index_.data(), bytes, GpuCopyKind::kHostToDevice,
                 comm_->stream());
}

Status ClusterImpl::PullOnDevice(const Status& checked, WorkerId worker, TableId table,
                                 std::span<const Key> keys, float* out) {
  void* stream = comm_->stream();
  const Status local = KeysOnHost(checked, &keys);
  std::vector<int>& recv_counts = recv_counts_;
  STRATA_RETURN_IF_ERROR(RouteAndSendKeys(local, worker, table, keys, &recv_counts));

  // The owner's part, into device memory (through host memory when the
  // shard's T0 is there).
  const uint32_t dim = tables_[table].dim;
  const size_t row_bytes = dim * sizeof(float);
  Status served = device_owner_rows_.Reserve(recv_keys_.size() * row_bytes);
  for (size_t at = 0; at < recv_keys_.size() && served.ok(); at += engine::kBatchKeysMax) {
    const size_t n = std::min<size_t>(engine::kBatchKeysMax, recv_keys_.size() - at);
    const std::span<const Key> part = std::span<const Key>(recv_keys_).subspan(at, n);
    float* rows = device_owner_rows_.as<float>() + at * dim;
    if (shard_on_gpu_) {
      served = ServeRetried([&] { return shard_->Pull(worker, table, part, rows, stream); });
      continue;
    }
    owner_rows_.resize(n * dim);
    float* host_rows = owner_rows_.data();
    served = ServeRetried([&] { return shard_->Pull(worker, table, part, host_rows); });
    if (served.ok()) {
      served = GpuCopy(rows, host_rows, n * row_bytes, GpuCopyKind::kHostToDevice, stream);
    }
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(served.WithContext("Cluster::Pull: the owner's shard")));

  STRATA_RETURN_IF_ERROR(device_batch_rows_.Reserve(router_.grouped().size() * row_bytes));
  CountBytes(recv_counts, router_.counts(), row_bytes);
  std::chrono::steady_clock::time_point start;
  STRATA_RETURN_IF_ERROR(BeginExchange(&start));
  STRATA_RETURN_IF_ERROR(comm_->AllToAllv(device_owner_rows_.as<void>(), recv_counts,
                                          device_batch_rows_.as<void>(), router_.counts(),
                                          row_bytes));
  STRATA_RETURN_IF_ERROR(EndExchange(start));
  // Into `out` in the caller's order, queued on the caller's stream.
  const std::span<const uint32_t> slots = router_.slots();
  const size_t bytes = slots.size() * sizeof(uint32_t);
  STRATA_RETURN_IF_ERROR(device_index_.Reserve(bytes));
  STRATA_RETURN_IF_ERROR(
      GpuCopy(device_index_.as<void>(), slots.data(), bytes, GpuCopyKind::kHostToDevice, stream));
  STRATA_RETURN_IF_ERROR(kernels::detail::GpuGatherRows(
      device_batch_rows_.as<float>(), device_index_.as<uint32_t>(), keys.size(), dim, out, stream));
  counters_.pull_calls.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

Status ClusterImpl::PushOnDevice(const Status& checked, WorkerId worker, TableId table,
                                 std::span<const Key> keys, const float* grads) {
  void* stream = comm_->stream();
  Status local = KeysOnHost(checked, &keys);
  const uint32_t dim = local.ok() ? tables_[table].dim : 0;
  const size_t row_bytes = dim * sizeof(float);
  if (local.ok()) {
    // The gradients of duplicates summed here, before they travel.
    router_.Route(table, keys, static_cast<uint32_t>(world_size()));
    const size_t groups = router_.grouped().size();
    local = UploadGroups(router_.slots(), groups);
    if (local.ok()) local = device_batch_rows_.Reserve(groups * row_bytes);
    if (local.ok()) {
      local = kernels::detail::GpuSumRowGroups(grads, device_index_.as<uint32_t>(),
                                               device_index_.as<uint32_t>() + keys.size(), groups,
                                               dim, device_batch_rows_.as<float>(), stream);
    }
  }
  std::vector<int>& recv_counts = recv_counts_;
  STRATA_RETURN_IF_ERROR(ExchangeHeaders(local, worker, table, "Cluster::Push", &recv_counts));
  STRATA_RETURN_IF_ERROR(SendKeys(recv_counts));
  STRATA_RETURN_IF_ERROR(device_owner_rows_.Reserve(recv_keys_.size() * row_bytes));
  CountBytes(router_.counts(), recv_counts, row_bytes);
  std::chrono::steady_clock::time_point start;
  STRATA_RETURN_IF_ERROR(BeginExchange(&start));
  STRATA_RETURN_IF_ERROR(comm_->AllToAllv(device_batch_rows_.as<void>(), router_.counts(),
                                          device_owner_rows_.as<void>(), recv_counts, row_bytes));
  STRATA_RETURN_IF_ERROR(EndExchange(start));

  // The owner's part: what several ranks sent for one key summed, so each
  // key is pushed once even when the keys take several shard calls.
  owner_router_.Route(table, recv_keys_, 1);
  const std::span<const Key> unique = owner_router_.grouped();
  Status served = UploadGroups(owner_router_.slots(), unique.size());
  if (served.ok()) served = device_owner_sums_.Reserve(unique.size() * row_bytes);
  if (served.ok()) {
    served = kernels::detail::GpuSumRowGroups(
        device_owner_rows_.as<float>(), device_index_.as<uint32_t>(),
        device_index_.as<uint32_t>() + recv_keys_.size(), unique.size(), dim,
        device_owner_sums_.as<float>(), stream);
  }
  if (served.ok() && !shard_on_gpu_) {
    owner_sums_.resize(unique.size() * dim);
    served = GpuCopy(owner_sums_.data(), device_owner_sums_.as<float>(),
                     owner_sums_.size() * sizeof(float), GpuCopyKind::kDeviceToHost, stream);
    if (served.ok()) served = GpuSync(stream);
  }
  for (size_t at = 0; at < unique.size() && served.ok(); at += engine::kBatchKeysMax) {
    const size_t n = std::min<size_t>(engine::kBatchKeysMax, unique.size() - at);
    const std::span<const Key> part = unique.subspan(at, n);
    const float* sums =
        (shard_on_gpu_ ? device_owner_sums_.as<float>() : owner_sums_.data()) + at * dim;
    served = NotRetriable(ServeRetried(
        [&] { return shard_->Push(worker, table, part, sums, shard_on_gpu_ ? stream : nullptr); }));
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(served.WithContext("Cluster::Push: the owner's shard")));
  counters_.push_calls.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

}  // namespace strata::cluster
