// NcclComm: the Comm (comm.h) over NCCL, for the cluster's NCCL form. The
// data plane (AllToAllv: keys, rows, gradients) moves device buffers by
// grouped ncclSend/ncclRecv; the control plane's host buffers (headers,
// codes, manifests, counters) are staged through a small device buffer of
// its own and moved by ncclAllGather, ncclAllReduce, ncclBroadcast or
// grouped ncclSend/ncclRecv. Every collective runs on stream() and returns
// once it completed there.
//
// The communicator is the cluster's own, made non-blocking (config.blocking
// = 0), so no NCCL call blocks the host: a collective (connection set-up
// included) that does not complete within the timeout is aborted
// (ncclCommAbort), returns Unavailable, and leaves the communicator unusable.
// An asynchronous NCCL error (ncclCommGetAsyncError) fails the collective the
// same way.
//
// Built only with NCCL (STRATA_HAVE_NCCL). Thread safety: one caller at a
// time, on any thread (each call makes the communicator's device current).
// Ownership: owns its communicator, stream, event and staging buffer.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/comm.h"
#include "strata/status.h"

namespace strata::cluster {

class NcclComm final : public Comm {
 public:
  // Collective over `parent` (every rank calls it): a communicator of its own,
  // split from the caller's (ncclCommSplit), on the caller's current device.
  static Result<std::unique_ptr<NcclComm>> Split(ncclComm_t parent, uint64_t timeout_ms);
  // Collective over `host` (every rank calls it): rank 0's ncclUniqueId goes
  // to every rank over `host`, then ncclCommInitRankConfig on the caller's
  // current device. `host` is used only here.
  static Result<std::unique_ptr<NcclComm>> Create(Comm* host, uint64_t timeout_ms);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool data_on_device() const override { return true; }
  void SetTimeout(uint64_t timeout_ms) override { timeout_ms_ = timeout_ms; }
  int device() const { return device_; }

  // The caller's stream for the span of one Pull or Push. What the cluster
  // queued on the previous caller's stream (a scatter into `out`, a shard's
  // Push) comes first: this stream waits for it, since both use the
  // cluster's scratch.
  void UseStream(void* stream) override;
  void UseOwnStream() override;
  void* stream() const override { return stream_; }

  [[nodiscard]] Status AllToAll(const void* send, void* recv, size_t bytes) override;
  [[nodiscard]] Status AllToAllv(const void* send, std::span<const int> send_counts, void* recv,
                                 std::span<const int> recv_counts, size_t item_bytes) override;
  [[nodiscard]] Status AllGather(const void* send, void* recv, size_t bytes) override;
  [[nodiscard]] Result<std::vector<std::string>> AllGatherBytes(const std::string& mine) override;
  [[nodiscard]] Status Broadcast(void* data, size_t bytes, int root) override;
  [[nodiscard]] Status AllReduceSum(const uint64_t* send, uint64_t* recv, int count) override;

 protected:
  Status CheckUsable() const override;

 private:
  using Deadline = std::chrono::steady_clock::time_point;

  NcclComm(ncclComm_t comm, int rank, int size, int device)
      : comm_(comm), rank_(rank), size_(size), device_(device) {}
  // The stream, event and staging buffer.
  Status Init();
  // Now + the timeout (far away for 0: forever).
  Deadline DeadlineFromNow() const;
  // Waits until ncclCommGetAsyncError leaves ncclInProgress (a non-blocking
  // call's completion); Unavailable after `deadline` (the communicator aborted).
  Status Settle(std::string_view call, Deadline deadline);
  // The NCCL calls `enqueue` makes, in one group on stream_, completed: the
  // group ends, settles and runs to the end of stream_ within the timeout.
  template <typename Fn>
  Status Run(std::string_view call, Fn&& enqueue);
  // A collective's start: usable, the device current, `scratch_bytes` staged.
  Status Begin(size_t scratch_bytes);
  // Staging: at least `bytes` of device memory at scratch_.
  Status Reserve(size_t bytes);
  Status Stage(void* device, const void* host, size_t bytes);    // host to device
  Status Unstage(void* host, const void* device, size_t bytes);  // device to host, synchronized
  // Aborts the communicator and makes every later call return `why`.
  Status Break(std::string why);
  // Break for `call` past the timeout.
  Status TimedOut(std::string_view call);
  Status NcclStatus(ncclResult_t rc, std::string_view call);
  Status CudaStatus(cudaError_t rc, std::string_view call);

  ncclComm_t comm_;
  int rank_;
  int size_;
  int device_;
  cudaStream_t own_stream_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  cudaEvent_t last_ = nullptr;  // the end of the previous caller stream's work
  bool last_recorded_ = false;  // false: no caller stream yet, or the record failed
  char* scratch_ = nullptr;     // device memory, scratch_bytes_ of it
  size_t scratch_bytes_ = 0;
  uint64_t timeout_ms_ = 0;
  std::string broken_;  // set when a collective failed or timed out: every later call's error
};

}  // namespace strata::cluster
