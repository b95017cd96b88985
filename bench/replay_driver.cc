// The replay driver (replay_driver.h): loader and worker threads per worker,
// a progress loop on the calling thread.
#include "bench/replay_driver.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <thread>

#include "base/mutex.h"
#include "bench/row_export.h"
#include "bench/row_staging.h"
#include "bench/verify_model.h"
#include "strata/store.h"
#include "strata/trace.h"
#include "trace/distinct_sketch.h"

namespace strata::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Batches a loader reads ahead of its worker without intents.
constexpr uint64_t kReadAheadBatches = 2;
// Retries of a store call failing with a retryable error (IOError,
// ResourceExhausted: injected or real SSD faults): at most
// ReplayOptions::attempts_max attempts in all, a split Pull's parts
// included, before the run fails; the wait between two attempts doubles from
// kBackoffMin to kBackoffMax (so a persistent error gives up within seconds,
// and a transient one is not hammered), cut short when the run fails.
constexpr auto kBackoffMin = std::chrono::microseconds(50);
constexpr auto kBackoffMax = std::chrono::milliseconds(10);
// Attempts of a whole Pull of more than one key before it is split in
// halves, each pulled (and split) on its own: the engine does a Pull larger
// than T0's room in chunks and one chunk's error fails the whole call, so
// a large Pull under faults would rarely get through whole.
constexpr uint32_t kAttemptsBeforeSplit = 4;
// Keys per Pull of the final check under injected faults.
constexpr size_t kFinalPullKeys = 4096;

bool Retryable(const Status& s) { return s.IsIOError() || s.IsResourceExhausted(); }

// Batches from a loader to its worker, gated so that intents run exactly
// `lookahead` batches ahead: the loader may hand over batch x once the worker
// has completed batch x - lookahead - 1 (x <= done + ahead), and the worker
// takes batch c only once batch c + gate has been handed over (or the trace
// ended). With intents, ahead = gate = lookahead; without, ahead bounds the
// read-ahead and gate is 0.
class BatchQueue {
 public:
  BatchQueue(uint64_t ahead, uint64_t gate) : ahead_(ahead), gate_(gate) {}

  // Waits until batch x (this worker's x-th) may be handed over; false when
  // the queue was closed.
  bool WaitForRoom(uint64_t x) {
    base::MutexLock lock(&mu_);
    while (!closed_ && x > done_ + ahead_) room_.Wait(&mu_);
    return !closed_;
  }
  void Push(trace::TraceBatch batch) {
    base::MutexLock lock(&mu_);
    items_.push_back(std::move(batch));
    pushed_++;
    ready_.Signal();
  }
  // The worker's next batch; false once the queue is finished and empty, or closed.
  bool Pop(trace::TraceBatch* batch) {
    base::MutexLock lock(&mu_);
    while (!closed_ && !(!items_.empty() && (finished_ || pushed_ >= popped_ + 1 + gate_)) &&
           !(finished_ && items_.empty())) {
      ready_.Wait(&mu_);
    }
    if (closed_ || items_.empty()) return false;
    *batch = std::move(items_.front());
    items_.pop_front();
    popped_++;
    return true;
  }
  // The worker completed a batch (advanced its clock).
  void Done() {
    base::MutexLock lock(&mu_);
    done_++;
    room_.Signal();
  }
  void Finish() {
    base::MutexLock lock(&mu_);
    finished_ = true;
    ready_.SignalAll();
  }
  void Close() {
    base::MutexLock lock(&mu_);
    closed_ = true;
    ready_.SignalAll();
    room_.SignalAll();
  }

 private:
  const uint64_t ahead_;
  const uint64_t gate_;
  base::Mutex mu_;
  base::CondVar room_;
  base::CondVar ready_;
  std::deque<trace::TraceBatch> items_ GUARDED_BY(mu_);
  uint64_t pushed_ GUARDED_BY(mu_) = 0;
  uint64_t popped_ GUARDED_BY(mu_) = 0;
  uint64_t done_ GUARDED_BY(mu_) = 0;
  bool finished_ GUARDED_BY(mu_) = false;
  bool closed_ GUARDED_BY(mu_) = false;
};

// Shared state of one run.
struct Run {
  const ReplayOptions& options;
  uint32_t workers;
  uint64_t batches_total;
  Store* store;
  VerifyModel* model;  // null without --verify
  bool t0_on_gpu;      // Pull and Push take device memory
  std::vector<std::string> table_names;
  std::vector<std::unique_ptr<BatchQueue>> queues;
  std::vector<WorkerId> ids;
  std::atomic<uint64_t> batches_done{0};
  std::atomic<uint64_t> pulls{0};
  std::atomic<uint64_t> retries{0};
  std::atomic<bool> failed{false};
  base::Mutex mu;
  Status error GUARDED_BY(mu);  // the first failure
  base::CondVar done_cv;
  base::CondVar failed_cv;  // signalled once `failed` is set
  uint32_t workers_done GUARDED_BY(mu) = 0;

  void Fail(const Status& s) {
    {
      base::MutexLock lock(&mu);
      if (error.ok()) error = s;
      failed.store(true);
    }
    failed_cv.SignalAll();
    for (auto& q : queues) q->Close();
  }

  // Waits `wait`, or less once the run has failed; false when it has.
  bool Backoff(std::chrono::microseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    base::MutexLock lock(&mu);
    while (!failed.load() && failed_cv.WaitUntil(&mu, deadline)) {
    }
    return !failed.load();
  }
};

// Attempts left to one store call (shared by the parts of a split Pull).
struct Attempts {
  explicit Attempts(const Run& run) : max(run.options.attempts_max), left(max) {}
  const uint32_t max;
  uint32_t left;
  uint32_t used() const { return max - left; }
};

// Calls fn until it succeeds, fails with a non-retryable error, or has been
// tried `tries` times or `attempts` ran out, with a growing backoff between
// attempts; counts the retries. The Store leaves a failed call without
// effect (dirty rows stay in memory; a chunked Push retries its later
// chunks itself), so a retry is safe; --verify would catch one that was not.
// Giving up keeps the last error's code; `what()` names the call for the
// message.
template <typename Fn, typename What>
Status WithRetries(Run& run, Attempts* attempts, uint32_t tries, Fn&& fn, What&& what) {
  Status s = Status::Internal("replay: no attempt left");
  auto backoff = std::chrono::microseconds(kBackoffMin);
  for (uint32_t i = 0; i < tries && attempts->left > 0; ++i) {
    if (i > 0) {
      if (!run.Backoff(backoff)) return s;  // the run failed elsewhere: it reports that
      backoff = std::min<std::chrono::microseconds>(2 * backoff, kBackoffMax);
    }
    attempts->left--;
    s = fn();
    if (s.ok() || !Retryable(s)) return s;
    run.retries.fetch_add(1, std::memory_order_relaxed);
  }
  if (attempts->left > 0) return s;  // `tries` used up: the caller splits
  return s.WithContext(what() + ": gave up after " + std::to_string(attempts->used()) +
                       " attempts");
}

template <typename Fn, typename What>
Status WithRetries(Run& run, Fn&& fn, What&& what) {
  Attempts attempts(run);
  return WithRetries(run, &attempts, attempts.max, std::forward<Fn>(fn), std::forward<What>(what));
}

std::string Describe(const Run& run, const char* call, TableId table, size_t keys) {
  return std::string(call) + " of table " + run.table_names[table] + " (" + std::to_string(keys) +
         " keys)";
}

// Pulls `keys` into `out` (dim floats each), retried; a Pull that keeps
// failing whole is split in halves, each pulled the same way, down to single
// keys. Pulls change no row, so pulling the parts at different times is as
// good as one call. `whole` is the size of the caller's Pull, for messages.
Status PullSplitting(Run& run, Attempts* attempts, WorkerId id, TableId table,
                     std::span<const Key> keys, float* out, size_t whole) {
  const bool split = keys.size() > 1;
  const Status s = WithRetries(
      run, attempts, split ? kAttemptsBeforeSplit : attempts->max,
      [&] { return run.store->Pull(id, table, keys, out); },
      [&] { return Describe(run, "Pull", table, whole); });
  if (s.ok() || !split || !Retryable(s) || attempts->left == 0 || run.failed.load()) return s;
  const size_t half = keys.size() / 2;
  STRATA_RETURN_IF_ERROR(PullSplitting(run, attempts, id, table, keys.first(half), out, whole));
  return PullSplitting(run, attempts, id, table, keys.subspan(half), out + half * run.options.dim,
                       whole);
}

Status PullRetried(Run& run, WorkerId id, TableId table, std::span<const Key> keys, float* out) {
  Attempts attempts(run);
  return PullSplitting(run, &attempts, id, table, keys, out, keys.size());
}

Status Loader(Run& run, uint32_t w) {
  STRATA_ASSIGN_OR_RETURN(auto reader, trace::TraceReader::Open(run.options.trace));
  BatchQueue& queue = *run.queues[w];
  trace::TraceBatch batch;
  std::vector<std::vector<Key>> unique;
  std::vector<TableKeys> table_keys;
  Clock clock = 0;
  for (uint64_t j = 0; j < run.batches_total; ++j) {
    STRATA_ASSIGN_OR_RETURN(bool more, reader->Next(&batch));
    if (!more) break;
    if (j % run.workers != w) continue;
    if (!queue.WaitForRoom(static_cast<uint64_t>(clock))) return Status::Ok();  // closed: failed
    if (run.options.intents) {
      unique.resize(batch.tables.size());
      table_keys.clear();
      for (size_t t = 0; t < batch.tables.size(); ++t) {
        unique[t] = batch.tables[t].keys;
        std::sort(unique[t].begin(), unique[t].end());
        unique[t].erase(std::unique(unique[t].begin(), unique[t].end()), unique[t].end());
        table_keys.push_back({batch.tables[t].table, unique[t]});
      }
      STRATA_RETURN_IF_ERROR(
          WithRetries(
              run, [&] { return run.store->Intent(run.ids[w], table_keys, clock, clock + 1); },
              [&] { return "Intent of " + std::to_string(table_keys.size()) + " tables"; })
              .WithContext("replay: worker " + std::to_string(w) + " batch " +
                           std::to_string(clock)));
    }
    queue.Push(std::move(batch));
    batch = trace::TraceBatch{};
    ++clock;
  }
  queue.Finish();
  return Status::Ok();
}

Status Worker(Run& run, uint32_t w) {
  const uint32_t dim = run.options.dim;
  const WorkerId id = run.ids[w];
  RowStaging staging(run.t0_on_gpu);
  STRATA_RETURN_IF_ERROR(staging.Check());
  trace::TraceBatch batch;
  std::vector<float> rows;
  std::vector<std::vector<float>> grads;  // per table of the batch
  std::vector<uint32_t> started;
  uint64_t index = 0;  // this worker's batch number (= its clock)
  while (run.queues[w]->Pop(&batch)) {
    if (run.failed.load()) return Status::Ok();
    const auto batch_start = SteadyClock::now();
    auto context = [&] {
      return "replay: worker " + std::to_string(w) + " batch " + std::to_string(index);
    };
    // Forward: pull every table and derive the gradients.
    grads.resize(batch.tables.size());
    for (size_t i = 0; i < batch.tables.size(); ++i) {
      const auto& t = batch.tables[i];
      const size_t n = t.keys.size();
      if (n == 0) continue;
      rows.resize(n * dim);
      grads[i].resize(n * dim);
      float* target = nullptr;
      STRATA_ASSIGN_OR_RETURN(target, staging.PullTarget(rows.data(), rows.size()));
      STRATA_RETURN_IF_ERROR(PullRetried(run, id, t.table, t.keys, target).WithContext(context()));
      STRATA_RETURN_IF_ERROR(staging.FinishPull(rows.data(), rows.size()));
      run.pulls.fetch_add(n, std::memory_order_relaxed);
      if (run.model != nullptr) {
        run.model->ReadStarted(t.table, t.keys, &started);
        STRATA_RETURN_IF_ERROR(
            run.model->CheckPull(w, index, t.table, t.keys, rows.data(), started));
        run.model->Gradients(t.table, t.keys, grads[i].data());
      } else {
        // Deterministic synthetic gradients: a small fraction of the row.
        for (size_t j = 0; j < n * dim; ++j) grads[i][j] = 0.01f * rows[j] + 1e-4f;
      }
    }
    // The model's compute: simulated work, not synchronisation (nothing
    // waits on it); the planner prefetches meanwhile.
    if (run.options.compute_us > 0) {
      std::this_thread::sleep_until(batch_start +
                                    std::chrono::microseconds(run.options.compute_us));
    }
    // Backward: push every table's gradients.
    for (size_t i = 0; i < batch.tables.size(); ++i) {
      const auto& t = batch.tables[i];
      if (t.keys.empty()) continue;
      if (run.model != nullptr) run.model->BeforePush(t.table, t.keys);
      const float* source = nullptr;
      STRATA_ASSIGN_OR_RETURN(source, staging.PushSource(grads[i].data(), grads[i].size()));
      STRATA_RETURN_IF_ERROR(WithRetries(
                                 run, [&] { return run.store->Push(id, t.table, t.keys, source); },
                                 [&] { return Describe(run, "Push", t.table, t.keys.size()); })
                                 .WithContext(context()));
      if (run.model != nullptr) run.model->AfterPush(w, t.table, t.keys);
    }
    STRATA_RETURN_IF_ERROR(WithRetries(
                               run, [&] { return run.store->AdvanceClock(id); },
                               [] { return std::string("AdvanceClock"); })
                               .WithContext(context()));
    run.queues[w]->Done();
    run.batches_done.fetch_add(1, std::memory_order_relaxed);
    ++index;
  }
  return Status::Ok();
}

// What one pass over the trace tells before the store opens: the batches to
// replay and, per table, the distinct keys a batch touches on average (the
// rows it needs in T0 at once, which sets the table's share of T0).
struct TraceShape {
  uint64_t batches = 0;
  std::vector<double> distinct_per_batch;  // by table id
  std::vector<uint64_t> distinct_keys;     // over the replayed batches, estimated; by table id
};

Result<TraceShape> ScanTrace(const std::string& path, uint64_t batches_max, size_t tables) {
  STRATA_ASSIGN_OR_RETURN(auto reader, trace::TraceReader::Open(path));
  trace::TraceBatch batch;
  std::vector<uint64_t> distinct(tables, 0);
  std::vector<trace::DistinctSketch> sketches(tables);
  std::vector<Key> unique;
  uint64_t seen = 0;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, reader->Next(&batch));
    if (!more) break;
    if (batches_max != 0 && seen >= batches_max) continue;  // read on: the whole file is checked
    ++seen;
    for (const auto& t : batch.tables) {
      if (t.table >= tables) continue;  // the reader checks ids against the header
      unique.assign(t.keys.begin(), t.keys.end());
      std::sort(unique.begin(), unique.end());
      distinct[t.table] += std::unique(unique.begin(), unique.end()) - unique.begin();
      for (Key k : t.keys) sketches[t.table].Add(k);
    }
  }
  TraceShape shape;
  const uint64_t n = reader->totals().batches;
  shape.batches = batches_max == 0 ? n : std::min(n, batches_max);
  for (uint64_t d : distinct) {
    shape.distinct_per_batch.push_back(seen == 0 ? 0.0 : double(d) / double(seen));
  }
  for (const trace::DistinctSketch& sketch : sketches)
    shape.distinct_keys.push_back(sketch.Estimate());
  return shape;
}

// An early answer, before the trace is read, for a directory that holds
// files and no store lock. A directory with a LOCK file is left to
// Store::Open, which checks under the lock (StoreOptions.error_if_exists):
// Unavailable naming the holder while a store has it open, "not empty"
// otherwise; so two replays cannot both pass, and a store in use is named
// as such.
Status CheckDir(const std::string& dir) {
  std::error_code ec;
  if (dir.empty()) return Status::InvalidArgument("replay: --dir is required");
  if (!std::filesystem::exists(dir, ec)) return Status::Ok();
  if (std::filesystem::exists(dir + "/LOCK", ec)) return Status::Ok();
  if (!std::filesystem::is_empty(dir, ec)) {
    return Status::InvalidArgument("replay: --dir " + dir +
                                   " is not empty; replay needs a fresh store directory");
  }
  if (ec) return Status::IOError("replay: --dir " + dir + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

ReplayPlan::ReplayPlan() = default;
ReplayPlan::ReplayPlan(ReplayPlan&&) noexcept = default;
ReplayPlan::~ReplayPlan() = default;

Result<ReplayPlan> PlanReplay(const ReplayOptions& o, bool check_dir) {
  if (o.intents && o.lookahead == 0) {
    return Status::InvalidArgument("replay: --lookahead must be at least 1 (or --no-intents)");
  }
  if (o.lookahead > kReplayLookaheadMax || o.compute_us > kReplayComputeUsMax) {
    return Status::InvalidArgument("replay: lookahead at most " +
                                   std::to_string(kReplayLookaheadMax) + ", compute_us at most " +
                                   std::to_string(kReplayComputeUsMax));
  }
  if (o.dim == 0) return Status::InvalidArgument("replay: --dim must be at least 1");
  if (o.attempts_max == 0) {
    return Status::InvalidArgument("replay: attempts_max must be at least 1");
  }
  if (check_dir) STRATA_RETURN_IF_ERROR(CheckDir(o.dir));
  // Read the whole trace once before touching the store: a corrupt trace
  // fails here and changes nothing.
  STRATA_ASSIGN_OR_RETURN(auto header_reader, trace::TraceReader::Open(o.trace));
  const trace::TraceHeader header = header_reader->header();
  header_reader.reset();
  STRATA_ASSIGN_OR_RETURN(const TraceShape shape,
                          ScanTrace(o.trace, o.batches_max, header.tables.size()));
  ReplayPlan plan;
  plan.batches_total = shape.batches;
  plan.workers = o.workers == 0 ? header.worker_count : o.workers;
  if (plan.workers > kWorkersMax) {
    return Status::InvalidArgument("replay: " + std::to_string(plan.workers) +
                                   " workers (--workers, or the trace's worker count), a store "
                                   "registers at most " +
                                   std::to_string(kWorkersMax));
  }
  if (o.verify) {
    STRATA_ASSIGN_OR_RETURN(plan.model,
                            VerifyModel::Build(o.trace, o.dim, plan.workers, o.batches_max));
  }
  StoreOptions& so = plan.store;
  so.dir = o.dir;
  so.error_if_exists = check_dir;
  so.device_rows_max = o.device_rows;
  so.dram_rows_max = o.dram_rows;
  so.dram_shards = o.dram_shards;
  so.fallback_policy = o.fallback;
  so.ssd_backend = o.ssd_backend;
  so.faults = o.faults;
  so.device_share_growth_max = o.device_share_growth;
  so.intent_act_ahead_max = o.act_ahead_max;
  so.ssd_write_log_fraction = o.ssd_write_log_fraction;
  so.ssd_format_version = o.ssd_format_version;
  so.ssd_index = o.ssd_index;
  so.ssd_range_bits = o.ssd_range_bits;
  so.use_gpu = o.use_gpu;
  for (size_t i = 0; i < header.tables.size(); ++i) {
    const trace::TraceTable& t = header.tables[i];
    TableOptions to;
    to.name = t.name;
    to.dim = o.dim;
    to.optimizer.kind = Optimizer::kSgd;
    to.optimizer.learning_rate = 1.0f;  // VerifyModel's exact arithmetic relies on it
    to.initializer = Initializer::kUniform;
    // T0 split by working set: a table's share follows the distinct keys a
    // batch touches in it (the rows that must sit in T0 together).
    to.device_rows_weight = std::max(1.0, shape.distinct_per_batch[i]);
    // The SSD layout sized for the keys the replay will store.
    to.expected_rows = std::max<uint64_t>(1, shape.distinct_keys[i]);
    plan.tables.push_back(to);
  }
  return plan;
}

Result<ReplayReport> RunReplay(const ReplayOptions& o, const StoreOpener& open,
                               const ProgressFn& progress) {
  STRATA_ASSIGN_OR_RETURN(ReplayPlan plan, PlanReplay(o, /*check_dir=*/true));
  const uint64_t batches_total = plan.batches_total;
  const uint32_t workers = plan.workers;
  std::unique_ptr<VerifyModel> model = std::move(plan.model);
  const StoreOptions& so = plan.store;
  const std::vector<TableOptions>& tables = plan.tables;
  STRATA_ASSIGN_OR_RETURN(auto store, open(so, tables));

  const bool t0_on_gpu = store->Stats().t0_on_gpu;
  Run run{o, workers, batches_total, store.get(), model.get(), t0_on_gpu};
  for (const TableOptions& t : tables) run.table_names.push_back(t.name);
  for (uint32_t w = 0; w < workers; ++w) {
    STRATA_ASSIGN_OR_RETURN(WorkerId id, store->RegisterWorker(t0_on_gpu ? 0 : -1));
    run.ids.push_back(id);
    run.queues.push_back(o.intents ? std::make_unique<BatchQueue>(o.lookahead, o.lookahead)
                                   : std::make_unique<BatchQueue>(kReadAheadBatches, 0));
  }
  const auto start = SteadyClock::now();
  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < workers; ++w) {
    threads.emplace_back([&run, w] {
      const Status s = Loader(run, w);
      if (!s.ok()) run.Fail(s);
    });
    threads.emplace_back([&run, w] {
      const Status s = Worker(run, w);
      if (!s.ok()) run.Fail(s);
      base::MutexLock lock(&run.mu);
      run.workers_done++;
      run.done_cv.SignalAll();
    });
  }
  auto elapsed = [&] { return std::chrono::duration<double>(SteadyClock::now() - start).count(); };
  {
    base::MutexLock lock(&run.mu);
    while (run.workers_done < workers) {
      run.done_cv.WaitFor(&run.mu, std::chrono::milliseconds(200));
      if (progress) {
        lock.Unlock();
        progress({run.batches_done.load(), batches_total, elapsed(), run.pulls.load()});
        lock.Lock();
      }
    }
  }
  for (auto& q : run.queues) q->Close();  // releases loaders of a failed run
  for (auto& t : threads) t.join();
  const double elapsed_s = elapsed();
  Status error;
  {
    base::MutexLock lock(&run.mu);  // the threads are joined; for the analysis
    error = run.error;
  }
  if (!error.ok()) {
    (void)store->Close();
    return error;
  }

  ReplayReport r;
  r.stats = store->Stats();
  if (model != nullptr) {
    for (TableId t = 0; t < tables.size(); ++t) {
      uint64_t table_rows = 0;
      if (!o.faults.enabled()) {
        // Every row exactly once, from every tier.
        auto scan = [&] {
          table_rows = 0;
          model->ForgetSeen(t);
          return store->ScanTable(t, [&](Key key, std::span<const float> row) {
            table_rows++;
            return model->CheckFinal(t, key, row);
          });
        };
        STRATA_RETURN_IF_ERROR(WithRetries(run, scan, [&] {
                                 return "ScanTable of table " + run.table_names[t];
                               }).WithContext("replay: final check"));
      } else {
        // Under injected faults a scan of a large table hardly ever gets
        // through without an error, so the final rows are pulled in chunks,
        // each retried (and split) on its own (one worker's id, its clock
        // long past).
        const std::vector<Key> keys = model->Keys(t);
        std::vector<float> rows;
        for (size_t off = 0; off < keys.size(); off += kFinalPullKeys) {
          std::span<const Key> chunk(keys.data() + off,
                                     std::min(kFinalPullKeys, keys.size() - off));
          rows.resize(chunk.size() * o.dim);
          STRATA_RETURN_IF_ERROR(PullRetried(run, run.ids[0], t, chunk, rows.data())
                                     .WithContext("replay: final check"));
          for (size_t i = 0; i < chunk.size(); ++i) {
            STRATA_RETURN_IF_ERROR(model->CheckFinal(
                t, chunk[i], std::span<const float>(rows.data() + i * o.dim, o.dim)));
          }
          table_rows += chunk.size();
        }
      }
      r.scanned_rows += table_rows;
    }
    STRATA_RETURN_IF_ERROR(model->CheckAllSeen());
    r.verified_rows = model->checked_rows();
  }
  if (!o.export_path.empty()) {
    RowExport rows;
    for (TableId t = 0; t < tables.size(); ++t) {
      const size_t before = rows.size();
      STRATA_RETURN_IF_ERROR(WithRetries(
                                 run,
                                 [&] {
                                   rows.Truncate(before);  // a retried scan starts over
                                   return store->ScanTable(
                                       t, [&](Key key, std::span<const float> row) {
                                         rows.Add(t, key, row);
                                         return Status::Ok();
                                       });
                                 },
                                 [&] { return "ScanTable of table " + run.table_names[t]; })
                                 .WithContext("replay: --export"));
    }
    STRATA_RETURN_IF_ERROR(rows.Write(o.export_path));
  }
  if (o.checkpoint_at_end) {
    STRATA_RETURN_IF_ERROR(WithRetries(
        run, [&] { return store->Checkpoint(); }, [] { return std::string("Checkpoint"); }));
  }
  STRATA_RETURN_IF_ERROR(WithRetries(
      run, [&] { return store->Close(); }, [] { return std::string("Close"); }));
  {
    const StoreStats end = store->Stats();  // after Close: every row written down
    r.ssd_bytes_written = end.ssd_bytes_written;
    r.ssd_user_bytes_written = end.ssd_user_bytes_written;
    r.ssd_write_amp = end.ssd_user_bytes_written == 0
                          ? 0
                          : double(end.ssd_bytes_written) / double(end.ssd_user_bytes_written);
  }
  const StoreStats& s = r.stats;
  r.batches = run.batches_done.load();
  r.pulls = s.pulls;
  r.stall_pulls = s.stall_pulls;
  r.stall_fraction = s.pulls == 0 ? 0 : static_cast<double>(s.stall_pulls) / s.pulls;
  r.ssd_row_reads = s.ssd_row_reads;
  r.ssd_row_writes = s.ssd_row_writes;
  r.elapsed_s = elapsed_s;
  r.rows_per_s = elapsed_s > 0 ? static_cast<double>(run.pulls.load()) / elapsed_s : 0;
  r.cache_rows = s.t0.rows_max + s.t1.rows_max;
  r.t0_hits = s.t0.hits;
  r.t1_hits = s.t1.hits;
  r.t2_hits = s.t1.misses;
  r.retried_errors = run.retries.load();
  return r;
}

}  // namespace strata::bench
