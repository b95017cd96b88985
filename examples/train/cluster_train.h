// Data-parallel training of the example's click model over a strata::Cluster
// (`mpirun -np R strata train ... --cluster`; docs/cluster.md, "Training
// under mpirun").
//
// Every rank reads the same data and trains on its share: row r goes to rank
// r % R, each share cut to the smallest one's size so that every rank runs
// the same batches (the cluster's calls are collective). The embedding rows
// live once, in the cluster: a batch's Pull and Push reach each key's owner,
// which sums the gradients every rank sent for a key and applies AdaGrad
// once. The dense parameters are replicated, and trained in one of two ways:
//   - kstep 0 (the default): AdaGrad on each rank, then each rank replaces
//     the parameters by their mean over the ranks (one MPI_Allreduce of bias,
//     weights and factors per step);
//   - kstep k >= 1: strata::DenseSync (k-step Adam, beta1 0, beta2 0.999,
//     its own learning rate): Adam on each rank, and every k-th step one
//     all-reduce averages parameters and second moments; after each epoch's
//     last training batch, a merge of the steps since the last one, so that
//     the validation rows are scored by one model. Per epoch of S training
//     steps that is ceil(S / k) all-reduces of 2 x (1 + dense columns x
//     (1 + dim)) floats.
// Each rank counts its dense all-reduces and the bytes it handed to them.
// The epoch's metrics are those of every rank's scores (gathered), the same
// on every rank.
//
// Thread safety: call from the thread that initialized MPI, on every rank of
// `comm`, with the same arguments.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "examples/train/dataset.h"
#include "examples/train/trainer.h"
#include "strata/cluster.h"
#include "strata/store.h"

namespace strata::train {

// This rank's rows of `data` (r % ranks == rank, the first
// floor(rows / ranks) of them).
Dataset RankShare(const Dataset& data, int rank, int ranks);

// A Store over a Cluster, for code written against the Store (the trainer):
// each call goes to the Cluster's of the same name (ScanTable to this rank's
// shard), so the collective calls must come in the same order on every rank.
// RegisterWorker ignores the device (the MPI form keeps T0 on the host).
std::unique_ptr<Store> StoreOverCluster(Cluster* cluster);

// One rank's dense-part communication over a run.
struct DenseCommStats {
  uint64_t steps = 0;            // dense optimizer steps (training batches)
  uint64_t allreduces = 0;       // MPI_Allreduce calls of the dense part
  uint64_t allreduce_bytes = 0;  // bytes handed to them
  uint64_t allreduce_us = 0;     // time in them
};

struct ClusterTrainResult {
  TrainResult train;
  std::vector<DenseCommStats> dense;  // every rank's, in rank order (on every rank)
};

// How the dense part is trained across the ranks.
struct DenseMerging {
  uint32_t kstep = 0;            // 0: AdaGrad averaged every step; k >= 1: DenseSync, k
  float learning_rate = 0.001f;  // Adam's (kstep >= 1)
};

// Trains on this rank's share of `data` through a cluster opened with
// `options` over `comm` (its directory's shards in options.store.dir).
Result<ClusterTrainResult> TrainOnCluster(const Dataset& data, const ClusterOptions& options,
                                          TrainOptions train, const DenseMerging& dense,
                                          MPI_Comm comm);

}  // namespace strata::train
