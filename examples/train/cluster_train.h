// Data-parallel training of the example's click model over a strata::Cluster
// (`mpirun -np R strata train ... --cluster`; docs/cluster.md, "Training
// under mpirun").
//
// Every rank reads the same data and trains on its share: row r goes to rank
// r % R, each share cut to the smallest one's size so that every rank runs
// the same batches (the cluster's calls are collective). The embedding rows
// live once, in the cluster: a batch's Pull and Push reach each key's owner,
// which sums the gradients every rank sent for a key and applies AdaGrad
// once. The dense parameters are replicated: after every step each rank
// replaces them by their mean over the ranks (one MPI_Allreduce of bias,
// weights and factors). The epoch's metrics are those of every rank's
// scores (gathered), the same on every rank.
//
// Thread safety: call from the thread that initialized MPI, on every rank of
// `comm`, with the same arguments.
#pragma once

#include <mpi.h>

#include <memory>

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

// Trains on this rank's share of `data` through a cluster opened with
// `options` over `comm` (its directory's shards in options.store.dir).
Result<TrainResult> TrainOnCluster(const Dataset& data, const ClusterOptions& options,
                                   TrainOptions train, MPI_Comm comm);

}  // namespace strata::train
