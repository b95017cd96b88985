// DenseSync: k-step model merging of a model's dense parameters across MPI
// ranks (the seed's Algorithm 2, "k-step Adam"; docs/cluster.md,
// "DenseSync"). Each rank trains its own copy of the dense layers: Step()
// applies Adam to every registered buffer from its gradients, locally, and
// the k-th Step after the last merge averages the parameters and Adam's
// second moment across the ranks with one MPI_Allreduce (a sum, then a
// division by the rank count), so the ranks leave a merge step with the same
// parameters and second moment. An explicit Merge() (before an evaluation)
// restarts the count of k. k = 1 is the per-step all-reduce of the same Adam
// (on the parameters rather than the gradients); larger k sends 1/k of its
// bytes. Stats() counts the all-reduces and the bytes handed to them.
//
// The sparse embeddings are not DenseSync's: they live in a Store or a
// Cluster, whose Push applies their optimizer once per key.
//
// Collective: Step() on every k-th call since the last merge, and Merge(),
// must be called by every rank of the communicator the same number of times,
// with the same buffers registered (same count of floats, in the same
// order); a mismatch fails the first merge on every rank with InvalidArgument
// naming the rank. A rank that dies or hangs makes the others' merge return
// Unavailable after collective_timeout_ms.
//
// Thread safety: one thread drives a DenseSync. Ownership: the caller owns
// the registered buffers, which must outlive the DenseSync, and the
// communicator, which Create duplicates. MPI must be initialized before
// Create and finalized after the DenseSync is destroyed.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "strata/status.h"

namespace strata {

struct DenseSyncOptions {
  // Adam (Kingma and Ba, with bias correction): m = b1 m + (1 - b1) g,
  // v = b2 v + (1 - b2) g^2, x -= lr m^ / (sqrt(v^) + eps). The seed trains
  // its dense part with b1 = 0 (no first moment is kept then) and b2 = 0.999.
  float learning_rate = 0.001f;
  float beta1 = 0.0f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  // k: merge every k-th Step. 1 merges every step; larger k sends 1/k of
  // the bytes, and the ranks' copies drift apart for up to k - 1 steps.
  uint32_t merge_every_steps = 1;
  // The longest a rank waits in a merge for the others (0: forever).
  uint64_t collective_timeout_ms = 600'000;
};

// Where a registered buffer lives.
enum class DenseMemory : uint8_t {
  kHost,
  // GPU memory of the current device: staged through host memory around
  // each step (CUDA builds only; FailedPrecondition otherwise).
  kDevice,
};

struct DenseSyncStats {
  uint64_t steps = 0;
  uint64_t merges = 0;
  uint64_t bytes_allreduced = 0;  // bytes this rank handed to MPI_Allreduce
  uint64_t allreduce_us = 0;      // time in the merges' all-reduce
  uint64_t unmerged_steps = 0;    // Steps since the last merge (0: merged, or no Step yet)
};

class DenseSync {
 public:
  // Collective over `comm`: duplicates it. InvalidArgument for a bad option
  // (a learning rate or epsilon not > 0, a beta outside [0, 1), k = 0).
  static Result<std::unique_ptr<DenseSync>> Create(const DenseSyncOptions& options, MPI_Comm comm);
  virtual ~DenseSync() = default;

  // Local. Registers `count` parameters and the buffer their gradients are
  // written to before each Step; returns the buffer's index. The parameters'
  // values at registration are the starting point: give every rank the same.
  // REQUIRES: no Step yet.
  virtual Result<uint32_t> Register(const std::string& name, float* params, const float* grads,
                                    size_t count, DenseMemory memory = DenseMemory::kHost) = 0;

  // Applies one Adam step to every buffer; the k-th call since the last
  // merge (the k-th, 2k-th, ... when Merge is never called) is collective
  // and then averages parameters and second moments.
  [[nodiscard]] virtual Status Step() = 0;
  // Collective: averages now (e.g. before a checkpoint or an evaluation);
  // the next merge of Step is then k Steps away.
  [[nodiscard]] virtual Status Merge() = 0;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual DenseSyncStats Stats() const = 0;
};

}  // namespace strata
