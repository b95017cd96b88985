// MpiComm: the Comm (comm.h) over MPI, host buffers: the cluster's duplicate
// of the caller's communicator, with every
// MPI call it makes returning a Status (MpiError is the one place where an
// MPI error code becomes one). Errors return instead of aborting: the
// duplicate's error handler is MPI_ERRORS_RETURN.
//
// Every method but rank() and size() is collective over the communicator:
// every rank calls it, in the same order. AgreeOn is how the cluster makes a
// failure on one rank a failure on all (the same code and message, naming
// the rank at fault).
//
// Thread safety: one caller at a time (ClusterImpl serializes its collective
// calls). Ownership: owns the duplicate and frees it in the destructor.
#pragma once

// The C bindings only: Open MPI's C++ bindings are deprecated and warn.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster/comm.h"
#include "strata/status.h"

namespace strata::cluster {

// Status of MPI call `call` on rank `rank` that returned `rc`; OK for MPI_SUCCESS.
Status MpiError(int rc, std::string_view call, int rank);

class MpiComm final : public Comm {
 public:
  // Collective over `comm`: duplicates it and sets MPI_ERRORS_RETURN.
  // REQUIRES: MPI is initialized.
  static Result<std::unique_ptr<MpiComm>> Dup(MPI_Comm comm);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool data_on_device() const override { return false; }
  void SetTimeout(uint64_t timeout_ms) override;
  MPI_Comm comm() const { return comm_; }

  [[nodiscard]] Status Barrier() override;
  [[nodiscard]] Status AllToAll(const void* send, void* recv, size_t bytes) override;
  // Counts in items: one MPI datatype of `item_bytes` contiguous bytes (made
  // on first use), so a row counts as one and the counts fit MPI's int.
  [[nodiscard]] Status AllToAllv(const void* send, std::span<const int> send_counts, void* recv,
                                 std::span<const int> recv_counts, size_t item_bytes) override;
  [[nodiscard]] Status AllGather(const void* send, void* recv, size_t bytes) override;
  [[nodiscard]] Result<std::vector<std::string>> AllGatherBytes(const std::string& mine) override;
  [[nodiscard]] Status Broadcast(void* data, size_t bytes, int root) override;
  [[nodiscard]] Status AllReduceSum(const uint64_t* send, uint64_t* recv, int count) override;
  // In place: data becomes the element-wise sum over ranks.
  [[nodiscard]] Status AllReduceSumInPlace(float* data, int count);

 protected:
  Status CheckUsable() const override;

 private:
  MpiComm(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  // MPI_Iallreduce with MPI_SUM (send may be MPI_IN_PLACE).
  Status AllReduce(const void* send, void* recv, int count, MPI_Datatype type);
  // Waits for `req` until done or the timeout (see SetTimeout).
  Status Wait(MPI_Request* req, std::string_view call);
  // The datatype of `item_bytes` contiguous bytes (MPI_BYTE for 1).
  Result<MPI_Datatype> ItemType(size_t item_bytes);
  // A byte count as MPI's int count.
  Status ByteCount(size_t bytes, std::string_view call, int* count) const;

  MPI_Comm comm_;
  int rank_;
  int size_;
  std::vector<int> send_displs_, recv_displs_;               // AllToAllv scratch
  std::vector<std::pair<size_t, MPI_Datatype>> item_types_;  // made by ItemType, freed at the end
  uint64_t timeout_ms_ = 0;
  std::string broken_;  // set when a collective timed out: the error every later call returns
};

}  // namespace strata::cluster
