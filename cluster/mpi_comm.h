// MpiComm: the cluster's duplicate of the caller's communicator, with every
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
#include <vector>

#include "strata/status.h"

namespace strata::cluster {

// Status of MPI call `call` on rank `rank` that returned `rc`; OK for MPI_SUCCESS.
Status MpiError(int rc, std::string_view call, int rank);

class MpiComm {
 public:
  // Collective over `comm`: duplicates it and sets MPI_ERRORS_RETURN.
  // REQUIRES: MPI is initialized.
  static Result<std::unique_ptr<MpiComm>> Dup(MPI_Comm comm);
  ~MpiComm();
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  // Each collective below waits at most `timeout_ms` (0: forever), then
  // returns Unavailable and leaves the communicator unusable (every later
  // call returns the same error): a collective cannot be cancelled.
  void SetTimeout(uint64_t timeout_ms);

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }

  // OK on every rank when `local` is OK on every rank; otherwise, on every
  // rank, the lowest failing rank's code with "rank <r>: <its message>".
  [[nodiscard]] Status AgreeOn(const Status& local);
  // An error on every rank when any rank reports one in `codes` (the code
  // per rank every rank already knows, e.g. from an all-to-all header); the
  // failing ranks' messages are gathered so every rank returns the same one.
  [[nodiscard]] Status AgreeOnKnown(std::span<const int32_t> codes, const Status& local);

  // `per_rank` elements of `type` to and from every rank.
  [[nodiscard]] Status AllToAll(const void* send, void* recv, int per_rank, MPI_Datatype type);
  // Element counts per rank; displacements are the counts' prefix sums.
  [[nodiscard]] Status AllToAllv(const void* send, std::span<const int> send_counts, void* recv,
                                 std::span<const int> recv_counts, MPI_Datatype type);
  [[nodiscard]] Status AllGather(const void* send, void* recv, int per_rank, MPI_Datatype type);
  // Every rank's bytes, in rank order (sizes gathered first).
  [[nodiscard]] Result<std::vector<std::string>> AllGatherBytes(const std::string& mine);
  [[nodiscard]] Status Broadcast(void* data, int count, MPI_Datatype type, int root);
  [[nodiscard]] Status AllReduceSum(const uint64_t* send, uint64_t* recv, int count);
  // In place: data becomes the element-wise sum over ranks.
  [[nodiscard]] Status AllReduceSumInPlace(float* data, int count);

 private:
  MpiComm(MPI_Comm comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}

  // MPI_Iallreduce with MPI_SUM (send may be MPI_IN_PLACE).
  Status AllReduce(const void* send, void* recv, int count, MPI_Datatype type);
  // Unavailable once a collective timed out.
  Status CheckUsable() const;
  // Waits for `req` until done or the timeout (see SetTimeout).
  Status Wait(MPI_Request* req, std::string_view call);

  MPI_Comm comm_;
  int rank_;
  int size_;
  std::vector<int> send_displs_, recv_displs_;  // AllToAllv scratch
  uint64_t timeout_ms_ = 0;
  std::string broken_;  // set when a collective timed out: the error every later call returns
};

}  // namespace strata::cluster
