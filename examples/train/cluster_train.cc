// Data-parallel training over a Cluster (cluster_train.h).
#include "examples/train/cluster_train.h"

#include <algorithm>

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

// The mean of every rank's dense parameters, in place.
Status AverageDense(MPI_Comm comm, int ranks, DenseParams* p, std::vector<float>* scratch) {
  scratch->clear();
  scratch->push_back(p->bias);
  scratch->insert(scratch->end(), p->weights.begin(), p->weights.end());
  scratch->insert(scratch->end(), p->factors.begin(), p->factors.end());
  STRATA_RETURN_IF_ERROR(
      MpiStatus(MPI_Allreduce(MPI_IN_PLACE, scratch->data(), static_cast<int>(scratch->size()),
                              MPI_FLOAT, MPI_SUM, comm),
                "MPI_Allreduce"));
  const float scale = 1.0f / static_cast<float>(ranks);
  size_t i = 0;
  p->bias = (*scratch)[i++] * scale;
  for (float& w : p->weights) w = (*scratch)[i++] * scale;
  for (float& f : p->factors) f = (*scratch)[i++] * scale;
  return Status::Ok();
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

Result<TrainResult> TrainOnCluster(const Dataset& data, const ClusterOptions& options,
                                   TrainOptions train, MPI_Comm comm) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  const Dataset share = RankShare(data, rank, ranks);
  if (share.rows() == 0) {
    return Status::InvalidArgument("train --cluster: " + std::to_string(data.rows()) +
                                   " rows for " + std::to_string(ranks) + " ranks");
  }
  // The tables from all the data, so that every rank passes the same ones.
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Cluster> cluster,
                          Cluster::Open(options, MakeTables(data, train.model), comm));
  std::unique_ptr<Store> store = StoreOverCluster(cluster.get());
  std::vector<float> scratch;
  train.collective_calls = true;
  train.average_dense = [&](DenseParams* p) { return AverageDense(comm, ranks, p, &scratch); };
  train.gather_scores = [&](std::vector<float>* logits, std::vector<float>* labels) {
    STRATA_RETURN_IF_ERROR(GatherFloats(comm, ranks, logits));
    return GatherFloats(comm, ranks, labels);
  };
  Result<TrainResult> result = Train(store.get(), share, train);
  // Every rank fails alike (the calls are collective), so all close.
  const Status closed = cluster->Close();
  if (result.ok() && !closed.ok()) return closed;
  return result;
}

}  // namespace strata::train
