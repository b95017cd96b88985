#include "examples/train/trainer.h"

#include <chrono>
#include <mutex>
#include <unordered_set>

#include "bench/row_staging.h"
#include "examples/train/limits.h"
#include "examples/train/metrics.h"
#include "trace/distinct_sketch.h"

namespace strata::train {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct PairHash {
  size_t operator()(const std::pair<size_t, Key>& p) const {
    return std::hash<Key>()(p.second ^ (p.first * 0x9e3779b97f4a7c15ull));
  }
};

// The trainer's side of one worker: its store calls, under the worker mutex
// the loader shares, with rows staged through device memory when T0 is a GPU.
class WorkerSession {
 public:
  WorkerSession(Store* store, WorkerId worker, std::mutex* mu, bool on_device)
      : store_(store), worker_(worker), mu_(mu), staging_(on_device) {}

  Status Check() const { return staging_.Check(); }

  Status Pull(TableId table, std::span<const Key> keys, std::vector<float>* out, uint32_t dim) {
    out->resize(keys.size() * dim);
    STRATA_ASSIGN_OR_RETURN(float* target, staging_.PullTarget(out->data(), out->size()));
    {
      std::lock_guard<std::mutex> lock(*mu_);
      STRATA_RETURN_IF_ERROR(store_->Pull(worker_, table, keys, target));
    }
    return staging_.FinishPull(out->data(), out->size());
  }

  Status Push(TableId table, std::span<const Key> keys, const std::vector<float>& grads) {
    STRATA_ASSIGN_OR_RETURN(const float* source, staging_.PushSource(grads.data(), grads.size()));
    std::lock_guard<std::mutex> lock(*mu_);
    return store_->Push(worker_, table, keys, source);
  }

  Status AdvanceClock() {
    std::lock_guard<std::mutex> lock(*mu_);
    return store_->AdvanceClock(worker_);
  }

 private:
  Store* const store_;
  const WorkerId worker_;
  std::mutex* const mu_;
  bench::RowStaging staging_;
};

void FillStoreCounters(const StoreStats& before, const StoreStats& after, EpochReport* r) {
  r->pulls = after.pulls - before.pulls;
  r->stall_pulls = after.stall_pulls - before.stall_pulls;
  r->stall_fraction =
      r->pulls == 0 ? 0.0 : static_cast<double>(r->stall_pulls) / static_cast<double>(r->pulls);
  r->t0_hits = after.t0.hits - before.t0.hits;
  r->t1_hits = after.t1.hits - before.t1.hits;
  r->ssd_row_reads = after.ssd_row_reads - before.ssd_row_reads;
  r->ssd_row_writes = after.ssd_row_writes - before.ssd_row_writes;
  r->prefetched_rows = after.prefetched_rows - before.prefetched_rows;
  r->late_prefetches = after.late_prefetches - before.late_prefetches;
}

Result<std::vector<TableId>> ResolveTables(Store* store, const Dataset& data, uint32_t row_dim) {
  std::vector<TableId> ids;
  for (const std::string& name : data.categorical_names) {
    STRATA_ASSIGN_OR_RETURN(TableId id, store->FindTable(name));
    if (id >= store->Tables().size() || store->Tables()[id].dim != row_dim) {
      return Status::InvalidArgument("train: table '" + name + "' must have dim " +
                                     std::to_string(row_dim));
    }
    ids.push_back(id);
  }
  return ids;
}

uint64_t CountUniqueKeys(const Dataset& data) {
  std::unordered_set<std::pair<size_t, Key>, PairHash> keys;
  for (size_t r = 0; r < data.rows(); ++r) {
    for (size_t c = 0; c < data.categorical_columns(); ++c) {
      if (data.Present(r, c)) keys.insert({c, data.KeyAt(r, c)});
    }
  }
  return keys.size();
}

}  // namespace

std::vector<TableOptions> MakeTables(const Dataset& data, const FmConfig& config) {
  std::vector<TableOptions> tables;
  const size_t columns = data.categorical_names.size();
  for (size_t c = 0; c < columns; ++c) {
    const std::string& name = data.categorical_names[c];
    TableOptions t;
    t.name = name;
    // T0 split by the column's distinct values (capped): a column with 3
    // values needs 3 rows, a column with 10,000 needs room for batches.
    // And the SSD layout sized for the column's keys (a row per distinct
    // value), estimated over every row.
    std::unordered_set<Key> distinct;
    trace::DistinctSketch all;
    for (size_t r = 0; r < data.rows(); ++r) {
      if (!data.present[r * columns + c]) continue;
      all.Add(data.KeyAt(r, c));
      if (distinct.size() < train::kDeviceWeightKeysMax) distinct.insert(data.KeyAt(r, c));
    }
    t.device_rows_weight = double(std::max<size_t>(distinct.size(), 1));
    t.expected_rows = std::max<uint64_t>(all.Estimate(), 1);
    t.dim = RowDim(config.dim);
    t.optimizer.kind = Optimizer::kAdagrad;
    t.optimizer.learning_rate = config.learning_rate;
    t.optimizer.epsilon = config.epsilon;
    t.initializer = Initializer::kUniform;
    t.init_scale = config.init_scale;
    tables.push_back(std::move(t));
  }
  return tables;
}

Result<TrainResult> Train(Store* store, const Dataset& data, const TrainOptions& options) {
  const uint32_t row_dim = RowDim(options.model.dim);
  STRATA_ASSIGN_OR_RETURN(std::vector<TableId> tables, ResolveTables(store, data, row_dim));
  STRATA_ASSIGN_OR_RETURN(WorkerId worker,
                          store->RegisterWorker(store->Stats().t0_on_gpu ? 0 : -1));
  STRATA_ASSIGN_OR_RETURN(Clock first_clock, store->CurrentClock(worker));
  std::mutex worker_mu;
  WorkerSession session(store, worker, &worker_mu, store->Stats().t0_on_gpu);
  STRATA_RETURN_IF_ERROR(session.Check());

  std::unique_ptr<trace::TraceWriter> trace;
  if (!options.trace_path.empty()) {
    trace::TraceHeader header;
    for (const TableOptions& t : store->Tables()) header.tables.push_back({t.name, 0});
    STRATA_ASSIGN_OR_RETURN(trace, trace::TraceWriter::Create(options.trace_path, header));
  }

  TrainResult result;
  FmModel model(static_cast<uint32_t>(data.dense_columns()), options.model);
  BatchLoader loader(data, tables, options.loader, store, worker, first_clock, &worker_mu,
                     trace.get());
  STRATA_RETURN_IF_ERROR(loader.Start());
  const Schedule schedule = loader.schedule();

  PulledRows rows(tables.size()), row_grads;
  DenseParams dense_grads;
  std::vector<float> logits;
  for (uint32_t epoch = 0; epoch < schedule.epochs; ++epoch) {
    EpochReport report;
    report.epoch = epoch;
    const StoreStats before = store->Stats();
    const double wait_before = loader.wait_seconds();
    const auto start = SteadyClock::now();
    std::vector<float> train_logits, train_labels, val_logits, val_labels;
    const size_t batches = schedule.train_batches + schedule.validation_batches;
    for (size_t b = 0; b < batches; ++b) {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Batch> batch, loader.Next());
      if (!batch) return Status::Internal("train: the loader ended early");
      for (size_t t = 0; t < tables.size(); ++t) {
        STRATA_RETURN_IF_ERROR(session.Pull(tables[t], batch->unique_keys[t], &rows[t], row_dim));
      }
      model.Forward(*batch, rows, &logits);
      auto& out_logits = batch->train ? train_logits : val_logits;
      auto& out_labels = batch->train ? train_labels : val_labels;
      out_logits.insert(out_logits.end(), logits.begin(), logits.end());
      out_labels.insert(out_labels.end(), batch->labels.begin(), batch->labels.end());
      if (batch->train) {
        model.Backward(*batch, rows, logits, &row_grads, &dense_grads);
        for (size_t t = 0; t < tables.size(); ++t) {
          if (batch->unique_keys[t].empty() && !options.collective_calls) continue;
          STRATA_RETURN_IF_ERROR(session.Push(tables[t], batch->unique_keys[t], row_grads[t]));
        }
        if (options.dense_step) {
          STRATA_RETURN_IF_ERROR(options.dense_step(dense_grads, &model.mutable_dense()));
        } else {
          model.ApplyDense(dense_grads);
          if (options.average_dense) {
            STRATA_RETURN_IF_ERROR(options.average_dense(&model.mutable_dense()));
          }
        }
        // The epoch's training batches come first, then its validation batches.
        if (b + 1 == schedule.train_batches && options.end_of_training) {
          STRATA_RETURN_IF_ERROR(options.end_of_training(&model.mutable_dense()));
        }
      }
      STRATA_RETURN_IF_ERROR(session.AdvanceClock());
      report.rows += batch->size();
    }
    report.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
    report.rows_per_s = report.seconds > 0 ? static_cast<double>(report.rows) / report.seconds : 0;
    report.loader_wait_fraction =
        report.seconds > 0 ? (loader.wait_seconds() - wait_before) / report.seconds : 0;
    if (options.gather_scores) {
      STRATA_RETURN_IF_ERROR(options.gather_scores(&train_logits, &train_labels));
      STRATA_RETURN_IF_ERROR(options.gather_scores(&val_logits, &val_labels));
    }
    report.train_logloss = MeanLogLoss(train_logits, train_labels);
    report.train_auc = RocAuc(train_logits, train_labels);
    report.validation_logloss = MeanLogLoss(val_logits, val_labels);
    report.validation_auc = RocAuc(val_logits, val_labels);
    FillStoreCounters(before, store->Stats(), &report);
    if (options.checkpoint_each_epoch) {
      const auto checkpoint_start = SteadyClock::now();
      STRATA_RETURN_IF_ERROR(store->Checkpoint().WithContext("train: checkpoint after epoch " +
                                                             std::to_string(epoch)));
      report.checkpoint_seconds =
          std::chrono::duration<double>(SteadyClock::now() - checkpoint_start).count();
    }
    result.epochs.push_back(report);
    result.validation_logits = std::move(val_logits);
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Batch> tail, loader.Next());
  if (tail) return Status::Internal("train: the loader produced more batches than scheduled");
  loader.Stop();
  if (trace) STRATA_RETURN_IF_ERROR(trace->Finish());
  result.unique_keys = CountUniqueKeys(data);
  result.dense = model.dense();
  result.final_stats = store->Stats();
  return result;
}

}  // namespace strata::train
