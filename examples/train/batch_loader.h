// BatchLoader: the data-loader thread of the training pipeline. It walks the
// schedule (per epoch: the training rows, shuffled by the seed, then the
// validation rows in order), builds each mini-batch (labels, dense features,
// unique keys per table), signals the store that the trainer will touch
// those keys at the batch's clock — Intent(worker, {table, keys}..., b, b+1)
// — and queues the batch. The queue holds at most `lookahead_batches`
// batches, so intents run exactly that many batches ahead of the trainer.
//
// Split: the last `validation_fraction` of the rows (by file order) are the
// validation set; the rest train. Everything is a function of the seed.
//
// Thread safety: Start/Next/Stop from the one trainer thread; the loader
// thread is internal. Store calls naming the worker are made under
// `worker_mu` (when given), which the trainer also holds for its own calls
// naming that worker, so calls for one worker come from one thread at a time.
// Each batch's unique keys per table may also be appended to a trace
// (include/strata/trace.h), the run's exact access sequence, for `strata trace
// opt` (Belady's MIN and LRU for the same run).
// Ownership: the dataset, store, mutex and trace writer are borrowed and must
// outlive the loader; the loader thread is the writer's only user until Stop.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "base/mutex.h"
#include "examples/train/batch.h"
#include "examples/train/dataset.h"
#include "strata/store.h"
#include "strata/trace.h"

namespace strata::train {

struct LoaderOptions {
  uint32_t batch_rows = 256;
  uint32_t epochs = 2;
  double validation_fraction = 0.2;  // last rows by file order
  // Batches built (and, with intents, signalled) ahead of the trainer. More
  // hides more SSD latency and holds more rows pinned in the device tier.
  uint32_t lookahead_batches = 4;
  bool intents = true;
  uint64_t seed = 1;
};

// How the rows split and how many batches each phase has.
struct Schedule {
  size_t train_rows = 0;
  size_t validation_rows = 0;
  size_t train_batches = 0;       // per epoch
  size_t validation_batches = 0;  // per epoch
  size_t epochs = 0;
  size_t total_batches() const { return epochs * (train_batches + validation_batches); }
};

// REQUIRES: rows > 0.
Result<Schedule> MakeSchedule(size_t rows, const LoaderOptions& options);

class BatchLoader {
 public:
  // `store`/`worker_mu` may be null when options.intents is false; `trace`
  // may be null (no trace).
  BatchLoader(const Dataset& data, const std::vector<TableId>& tables, const LoaderOptions& options,
              Store* store, WorkerId worker, Clock first_clock, std::mutex* worker_mu,
              trace::TraceWriter* trace);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  [[nodiscard]] Status Start();
  // The next batch; nullptr after the last one. Blocks while the loader is
  // behind (that wait is added to wait_seconds()). A loader error (a failed
  // Intent) is returned here.
  Result<std::unique_ptr<Batch>> Next() EXCLUDES(mu_);
  // Stops and joins the thread (idempotent; the destructor calls it).
  void Stop() EXCLUDES(mu_);

  const Schedule& schedule() const { return schedule_; }
  double wait_seconds() const { return wait_seconds_; }

 private:
  void Run() EXCLUDES(mu_);
  std::unique_ptr<Batch> Build(size_t step, uint32_t epoch, bool train,
                               std::span<const uint32_t> rows) const;
  Status Signal(const Batch& batch);
  Status AppendTrace(const Batch& batch);

  // Constant after construction.
  const Dataset& data_;
  const std::vector<TableId> tables_;
  const LoaderOptions options_;
  Store* const store_;
  const WorkerId worker_;
  const Clock first_clock_;
  std::mutex* const worker_mu_;
  trace::TraceWriter* const trace_;  // used by the loader thread only
  Schedule schedule_;

  base::Mutex mu_;
  base::CondVar cv_;
  std::deque<std::unique_ptr<Batch>> queue_ GUARDED_BY(mu_);
  bool finished_ GUARDED_BY(mu_) = false;  // no more batches
  bool stop_ GUARDED_BY(mu_) = false;
  Status status_ GUARDED_BY(mu_);  // first loader error
  std::thread thread_;
  double wait_seconds_ = 0;  // trainer thread only
};

}  // namespace strata::train
