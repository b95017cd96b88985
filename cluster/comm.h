// Comm: the collectives the Cluster runs, as Status, over one transport.
// Two implementations: MpiComm (mpi_comm.h; host buffers) and NcclComm
// (nccl_comm.h; the data plane in device memory, the control plane's host
// scalars staged through a small device buffer). The cluster code is the same
// over both: the control plane (AgreeOn, headers, counts, manifests, stats)
// takes host buffers on either; AllToAllv, the data plane (keys, rows,
// gradients), takes buffers where data_on_device() says.
//
// Every collective waits at most the timeout (SetTimeout; 0: forever), then
// returns Unavailable and leaves the communicator unusable: every later call
// returns the same error (an MPI collective cannot be cancelled; an NCCL one
// is aborted).
//
// Thread safety: none; the Cluster calls it under its collective mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "strata/status.h"

namespace strata::cluster {

// A Status of `code` (not OK) with `msg`; Internal for kOk.
Status StatusWithCode(StatusCode code, std::string msg);

class Comm {
 public:
  virtual ~Comm() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // True: AllToAllv's buffers are device memory (NCCL); false: host memory.
  virtual bool data_on_device() const = 0;
  virtual void SetTimeout(uint64_t timeout_ms) = 0;
  // The stream the collectives run on: the caller's cudaStream_t (nullptr:
  // the default stream) from UseStream to UseOwnStream, else the
  // communicator's own. The MPI form has none.
  virtual void UseStream(void* stream) { (void)stream; }
  virtual void UseOwnStream() {}
  virtual void* stream() const { return nullptr; }

  // OK on every rank when `local` is OK on every rank; otherwise, on every
  // rank, the lowest failing rank's code with "rank <r>: <its message>".
  [[nodiscard]] Status AgreeOn(const Status& local);
  // An error on every rank when any rank reports one in `codes` (the code
  // per rank every rank already knows, e.g. from an all-to-all header); the
  // failing ranks' messages are gathered so every rank returns the same one.
  [[nodiscard]] Status AgreeOnKnown(std::span<const int32_t> codes, const Status& local);

  // Returns once every rank has called it. This one is an AllGather of one
  // byte (a transport without a barrier of its own); MpiComm's is
  // MPI_Ibarrier. The Cluster calls it only under
  // ClusterOptions::align_exchanges (a diagnostic).
  [[nodiscard]] virtual Status Barrier();

  // Host buffers: `bytes` to and from every rank.
  [[nodiscard]] virtual Status AllToAll(const void* send, void* recv, size_t bytes) = 0;
  // Host buffers: `bytes` from every rank, in rank order.
  [[nodiscard]] virtual Status AllGather(const void* send, void* recv, size_t bytes) = 0;
  // Every rank's bytes, in rank order.
  [[nodiscard]] virtual Result<std::vector<std::string>> AllGatherBytes(
      const std::string& mine) = 0;
  [[nodiscard]] virtual Status Broadcast(void* data, size_t bytes, int root) = 0;
  // Host buffers: recv[i] = the sum over ranks of send[i].
  [[nodiscard]] virtual Status AllReduceSum(const uint64_t* send, uint64_t* recv, int count) = 0;
  // Items of `item_bytes` per rank, in host or device memory
  // (data_on_device); displacements are the counts' prefix sums.
  [[nodiscard]] virtual Status AllToAllv(const void* send, std::span<const int> send_counts,
                                         void* recv, std::span<const int> recv_counts,
                                         size_t item_bytes) = 0;

 protected:
  // Unavailable once a collective timed out.
  virtual Status CheckUsable() const = 0;

  // AllGatherBytes over AllGather, for a transport with no all-gather of
  // varying sizes: every rank's length, then every rank's bytes padded to
  // the longest.
  [[nodiscard]] Result<std::vector<std::string>> AllGatherBytesPadded(const std::string& mine);

 private:
  std::vector<int32_t> agree_codes_;    // AgreeOn's scratch: every rank's code
  std::vector<uint8_t> barrier_bytes_;  // Barrier's scratch: a byte per rank
};

}  // namespace strata::cluster
