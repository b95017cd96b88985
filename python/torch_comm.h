// TorchComm: the cluster's Comm (cluster/comm.h) over a torch.distributed
// process group, for Python programs started by torchrun. The collectives
// are those of a Python object (strata.distributed's _Collectives) that runs
// them with torch.distributed on the group (gloo on the CPU; NCCL through
// device copies): this file hands it the cluster's host buffers as
// memoryviews, in place, and turns a Python exception into Unavailable.
//
// Buffers: host memory only (data_on_device() is false, as MpiComm's), so a
// shard's T0 stays in host memory. Timeout: the process group's own
// (torch.distributed.init_process_group(timeout=...)); SetTimeout is ignored.
// After a failed collective every later call returns the same error.
//
// Thread safety: one caller at a time (ClusterImpl serializes its
// collectives); each call takes the GIL, which its caller must not hold.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cluster/comm.h"

namespace strata::python {

class TorchComm final : public cluster::Comm {
 public:
  // `ops` has rank(), size(), all_to_all(send, send_bytes, recv,
  // recv_bytes), all_gather(send, recv), broadcast(data, root) and
  // all_reduce_sum(send, recv) over uint64 memoryviews. REQUIRES: the GIL.
  static std::unique_ptr<TorchComm> Create(pybind11::object ops);
  ~TorchComm() override;
  TorchComm(const TorchComm&) = delete;
  TorchComm& operator=(const TorchComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool data_on_device() const override { return false; }
  void SetTimeout(uint64_t timeout_ms) override { (void)timeout_ms; }

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
  TorchComm(pybind11::object ops, int rank, int size);

  // Runs `call` (a Python call on ops_) under the GIL; a Python exception
  // becomes Unavailable naming `what` and this rank, and breaks the comm.
  template <typename Fn>
  Status Run(const char* what, Fn&& call);

  pybind11::object ops_;  // released under the GIL (the destructor takes it)
  const int rank_;
  const int size_;
  std::string broken_;  // the failure that made the comm unusable; empty: usable
};

}  // namespace strata::python
