// Data-parallel training over a Cluster (cluster_train.h).
#include "examples/train/cluster_train.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "strata/dense_sync.h"

namespace strata::train {
namespace {

class ClusterStore final : public Store {
 public:
  explicit ClusterStore(Cluster* cluster) : cluster_(cluster) {}

  Result<WorkerId> RegisterWorker(int) override { return cluster_->RegisterWorker(); }
  Status Intent(WorkerId worker, TableId table, std::span<const Key> keys, Clock start,
                Clock end) override {
    return cluster_->Intent(worker, table, keys, start, end);
  }
  Status Intent(WorkerId worker, std::span<const TableKeys> keys, Clock start, Clock end) override {
    for (const TableKeys& t : keys) {
      STRATA_RETURN_IF_ERROR(cluster_->Intent(worker, t.table, t.keys, start, end));
    }
    return Status::Ok();
  }
  Status AdvanceClock(WorkerId worker) override { return cluster_->AdvanceClock(worker); }
  Result<Clock> CurrentClock(WorkerId worker) const override {
    return cluster_->CurrentClock(worker);
  }
  Status Pull(WorkerId worker, TableId table, std::span<const Key> keys, float* out,
              void*) override {
    return cluster_->Pull(worker, table, keys, out);
  }
  Status Push(WorkerId worker, TableId table, std::span<const Key> keys, const float* grads,
              void*) override {
    return cluster_->Push(worker, table, keys, grads);
  }
  Status DrainIntents() override { return cluster_->DrainIntents(); }
  Status ScanTable(TableId table,
                   const std::function<Status(Key, std::span<const float>)>& fn) override {
    return cluster_->shard().ScanTable(table, fn);
  }
  Status Checkpoint() override { return cluster_->Checkpoint(); }
  StoreStats Stats() const override { return cluster_->Stats().store; }
  Result<TableId> FindTable(const std::string& name) const override {
    const std::vector<TableOptions>& tables = cluster_->Tables();
    for (size_t t = 0; t < tables.size(); ++t) {
      if (tables[t].name == name) return static_cast<TableId>(t);
    }
    return Status::NotFound("no table named '" + name + "' in the cluster");
  }
  const std::vector<TableOptions>& Tables() const override { return cluster_->Tables(); }
  Status Close() override { return cluster_->Close(); }

 private:
  Cluster* const cluster_;
};

Status MpiStatus(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  return Status::Unavailable(std::string("train --cluster: ") + call + " failed");
}

// The dense parameters as one vector: bias, weights, factors.
size_t DenseFloats(const DenseParams& p) { return 1 + p.weights.size() + p.factors.size(); }
void Pack(const DenseParams& p, float* out) {
  *out++ = p.bias;
  out = std::copy(p.weights.begin(), p.weights.end(), out);
  std::copy(p.factors.begin(), p.factors.end(), out);
}
void Unpack(const float* in, float scale, DenseParams* p) {
  p->bias = *in++ * scale;
  for (float& w : p->weights) w = *in++ * scale;
  for (float& f : p->factors) f = *in++ * scale;
}

uint64_t MicrosSince(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count());
}

// kstep 0: AdaGrad on each rank (the model's), then the mean of every
// rank's dense parameters, in place, after every step.
class AveragedDense {
 public:
  AveragedDense(MPI_Comm comm, int ranks) : comm_(comm), ranks_(ranks) {}

  Status Average(DenseParams* p) {
    scratch_.resize(DenseFloats(*p));
    Pack(*p, scratch_.data());
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(
        MpiStatus(MPI_Allreduce(MPI_IN_PLACE, scratch_.data(), static_cast<int>(scratch_.size()),
                                MPI_FLOAT, MPI_SUM, comm_),
                  "MPI_Allreduce"));
    stats_.allreduce_us += MicrosSince(start);
    ++stats_.steps;
    ++stats_.allreduces;
    stats_.allreduce_bytes += scratch_.size() * sizeof(float);
    Unpack(scratch_.data(), 1.0f / static_cast<float>(ranks_), p);
    return Status::Ok();
  }

  DenseCommStats Stats() const { return stats_; }

 private:
  const MPI_Comm comm_;
  const int ranks_;
  std::vector<float> scratch_;
  DenseCommStats stats_;
};

// kstep k >= 1: the dense parameters trained by a DenseSync (k-step Adam).
// DenseSync owns the authoritative copy (params_, one registered buffer);
// each step packs the gradients in and unpacks the parameters out.
class KStepDense {
 public:
  explicit KStepDense(std::unique_ptr<DenseSync> sync) : sync_(std::move(sync)) {}

  Status Step(const DenseParams& grads, DenseParams* p) {
    if (params_.empty()) {  // the first step: every rank starts from the same seed's values
      params_.resize(DenseFloats(*p));
      grads_.resize(params_.size());
      Pack(*p, params_.data());
      STRATA_RETURN_IF_ERROR(
          sync_->Register("fm_dense", params_.data(), grads_.data(), params_.size()).status());
    }
    if (DenseFloats(grads) != grads_.size()) {
      return Status::Internal("train --cluster: dense gradients of " +
                              std::to_string(DenseFloats(grads)) + " floats, parameters of " +
                              std::to_string(grads_.size()));
    }
    Pack(grads, grads_.data());
    STRATA_RETURN_IF_ERROR(sync_->Step());
    Unpack(params_.data(), 1.0f, p);
    return Status::Ok();
  }

  // Merges the steps since the last merge, if any (collective: every rank
  // has run the same steps).
  Status MergeNow(DenseParams* p) {
    if (sync_->Stats().unmerged_steps == 0) return Status::Ok();
    STRATA_RETURN_IF_ERROR(sync_->Merge());
    Unpack(params_.data(), 1.0f, p);
    return Status::Ok();
  }

  DenseCommStats Stats() const {
    const DenseSyncStats s = sync_->Stats();
    return {s.steps, s.merges, s.bytes_allreduced, s.allreduce_us};
  }

 private:
  std::unique_ptr<DenseSync> sync_;
  std::vector<float> params_, grads_;
};

// Every rank's counters, in rank order.
Result<std::vector<DenseCommStats>> GatherDenseStats(MPI_Comm comm, int ranks,
                                                     const DenseCommStats& mine) {
  const uint64_t send[4] = {mine.steps, mine.allreduces, mine.allreduce_bytes, mine.allreduce_us};
  std::vector<uint64_t> all(4 * static_cast<size_t>(ranks));
  STRATA_RETURN_IF_ERROR(MpiStatus(
      MPI_Allgather(send, 4, MPI_UINT64_T, all.data(), 4, MPI_UINT64_T, comm), "MPI_Allgather"));
  std::vector<DenseCommStats> out(static_cast<size_t>(ranks));
  for (size_t r = 0; r < out.size(); ++r) {
    out[r] = {all[4 * r], all[4 * r + 1], all[4 * r + 2], all[4 * r + 3]};
  }
  return out;
}

// Every rank's floats, in rank order, in place of this rank's.
Status GatherFloats(MPI_Comm comm, int ranks, std::vector<float>* values) {
  const int mine = static_cast<int>(values->size());
  std::vector<int> counts(ranks), displs(ranks, 0);
  STRATA_RETURN_IF_ERROR(MpiStatus(
      MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm), "MPI_Allgather"));
  for (int r = 1; r < ranks; ++r) displs[r] = displs[r - 1] + counts[r - 1];
  std::vector<float> all(static_cast<size_t>(displs[ranks - 1]) + counts[ranks - 1]);
  STRATA_RETURN_IF_ERROR(MpiStatus(MPI_Allgatherv(values->data(), mine, MPI_FLOAT, all.data(),
                                                  counts.data(), displs.data(), MPI_FLOAT, comm),
                                   "MPI_Allgatherv"));
  *values = std::move(all);
  return Status::Ok();
}

}  // namespace

Dataset RankShare(const Dataset& data, int rank, int ranks) {
  Dataset share;
  share.categorical_names = data.categorical_names;
  share.dense_names = data.dense_names;
  const size_t per_rank = data.rows() / static_cast<size_t>(ranks);
  const size_t dense = data.dense_columns();
  const size_t cats = data.categorical_columns();
  for (size_t i = 0; i < per_rank; ++i) {
    const size_t r = i * static_cast<size_t>(ranks) + static_cast<size_t>(rank);
    share.labels.push_back(data.labels[r]);
    share.dense.insert(share.dense.end(), data.dense.begin() + r * dense,
                       data.dense.begin() + (r + 1) * dense);
    share.keys.insert(share.keys.end(), data.keys.begin() + r * cats,
                      data.keys.begin() + (r + 1) * cats);
    share.present.insert(share.present.end(), data.present.begin() + r * cats,
                         data.present.begin() + (r + 1) * cats);
  }
  return share;
}

std::unique_ptr<Store> StoreOverCluster(Cluster* cluster) {
  return std::make_unique<ClusterStore>(cluster);
}

Result<ClusterTrainResult> TrainOnCluster(const Dataset& data, const ClusterOptions& options,
                                          TrainOptions train, const DenseMerging& dense,
                                          MPI_Comm comm) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  const Dataset share = RankShare(data, rank, ranks);
  if (share.rows() == 0) {
    return Status::InvalidArgument("train --cluster: " + std::to_string(data.rows()) +
                                   " rows for " + std::to_string(ranks) + " ranks");
  }
  // The dense part's trainer, before the cluster (DenseSync::Create is
  // collective and fails alike on every rank).
  AveragedDense averaged(comm, ranks);
  std::unique_ptr<KStepDense> kstepped;
  if (dense.kstep > 0) {
    DenseSyncOptions so;
    so.learning_rate = dense.learning_rate;
    so.merge_every_steps = dense.kstep;
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<DenseSync> sync, DenseSync::Create(so, comm));
    kstepped = std::make_unique<KStepDense>(std::move(sync));
    train.dense_step = [&](const DenseParams& g, DenseParams* p) { return kstepped->Step(g, p); };
    train.end_of_training = [&](DenseParams* p) { return kstepped->MergeNow(p); };
  } else {
    train.average_dense = [&](DenseParams* p) { return averaged.Average(p); };
  }
  // The tables from all the data, so that every rank passes the same ones.
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster,
                          Cluster::Open(options, MakeTables(data, train.model), comm));
  std::unique_ptr<Store> store = StoreOverCluster(cluster.get());
  train.collective_calls = true;
  train.gather_scores = [&](std::vector<float>* logits, std::vector<float>* labels) {
    STRATA_RETURN_IF_ERROR(GatherFloats(comm, ranks, logits));
    return GatherFloats(comm, ranks, labels);
  };
  Result<ClusterTrainResult> result = [&]() -> Result<ClusterTrainResult> {
    ClusterTrainResult r;
    STRATA_ASSIGN_OR_RETURN(r.train, Train(store.get(), share, train));
    STRATA_ASSIGN_OR_RETURN(
        r.dense, GatherDenseStats(comm, ranks, kstepped ? kstepped->Stats() : averaged.Stats()));
    return r;
  }();
  // Every rank fails alike (the calls are collective), so all close.
  const Status closed = cluster->Close();
  if (result.ok() && !closed.ok()) return closed;
  return result;
}

}  // namespace strata::train
