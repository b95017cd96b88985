// StoreImpl: the Store behind include/strata/store.h.
//
// Tiers: T0 is one DeviceTier per table (a kernels::DeviceTable in GPU
// memory, or its host twin, with its staging); T1 is one storage::DramCache
// shared by all tables; T2 is a storage::RowStore (native SSD store or
// RocksDB). The hierarchy is exclusive: a row promoted to T0 leaves T1; a
// row evicted from T0 is demoted into T1 with its dirty flag; T1 writes
// dirty rows to T2 before reusing their slots and drops clean ones. A row
// never seen is created in T0 by the table's deterministic initializer (so
// dropping it clean loses nothing).
//
// T0 eviction order is "largest next_use first" across all tables: a row
// with an intent has next_use = the start of its nearest window (Belady on
// the known future); a row without has next_use >= kFallbackBase, ordered by
// the fallback policy (LRU: older accesses are larger), so it goes first.
// device_rows_max bounds the rows of all tables' T0 together; when a table
// needs room, the victims are the rows with the largest next_use among all
// tables' T0 (MakeT0Room), so T0 holds rows by one order, as T1 does.
//
// Files, one concern each (all define StoreImpl members):
//   store_open.cc        Open: tables, tiers, the SSD Env, threads; Close
//   store_checks.cc      what Open and every call accept: options, ids, batches
//   store_workers.cc     workers and clocks, FindTable, the checkpoint meta
//   store_data.cc        the foreground data path: Pull and Push in one T0
//                        pass, the slow path of missing keys, chunked batches
//   store_push_retry.cc  a chunked Push that failed part-way: what each
//                        worker remembers of it, so that a retry of the same
//                        Push applies only the rest
//   key_dedup.h          distinct keys by hashing (the slow path's dedup)
//   store_tiers.cc       moving rows between tiers (MakeResident, EvictFromT0,
//                        staging) and the cleaner thread
//   store_eviction.cc    the eviction order: next uses, fallback values, the
//                        victims of T0 chosen across tables (MakeT0Room)
//   store_intent.cc      Intent, DrainIntents and the planner thread
//   store_checkpoint.cc  Checkpoint, T0 write-back, ScanTable
//   store_stats.cc       Stats
//   device_tier.h        T0 of one table: its DeviceTable, the staging between
//                        host and runner memory, every batch operation on T0
//   runner_staging.h     staging buffers and the copy of T0 rows to the host
//
// Locking, outermost first:
//   close_.mu            held by Close throughout
//   close_.calls_mu      Close's wait for the calls in flight; Stats' final copy
//   apply_mu_            ApplyWaitingIntents (a Pull, before its table's
//                        lock; the planner's round)
//   Table::mu            a table's T0, its staging and every move of its rows
//                        between tiers; one at a time, except Checkpoint
//                        (every table, ascending ids)
//   intent_mu_           the IntentIndex; taken under a Table::mu, never the
//                        other way round
//   fallback_.mu, cleaner_.mu, planner_.mu, Worker::inbox_mu,
//   Worker::push_mu,
//   workers_.register_mu leaves: nothing is taken while one is held
// The order is declared with ACQUIRED_AFTER/ACQUIRED_BEFORE, which clang
// checks with -Wthread-safety-beta (an error in make lint).
// T1 and T2 take their own locks inside their calls, under Table::mu.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "engine/action_timing.h"
#include "engine/device_tier.h"
#include "engine/frequency_sketch.h"
#include "engine/intent_index.h"
#include "engine/limits.h"
#include "engine/runner_staging.h"
#include "io/fault_env.h"
#include "kernels/device_table.h"
#include "storage/dram/dram_cache.h"
#include "storage/ssd/row_store.h"
#include "strata/store.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace strata::engine {

struct StoreCounters {
  std::atomic<uint64_t> t0_hits{0}, t0_misses{0}, t1_hits{0}, t1_misses{0};
  std::atomic<uint64_t> t0_rows_in{0}, t0_rows_out{0}, t0_evictions{0}, t0_dirty_out{0};
  std::atomic<uint64_t> t0_bytes_in{0}, t0_bytes_out{0};
  std::atomic<uint64_t> ssd_row_reads{0}, created_rows{0};
  std::atomic<uint64_t> pulls{0}, pushes{0}, stall_pulls{0}, nonfinite_grads{0};
  std::atomic<uint64_t> prefetched_rows{0}, late_prefetches{0};
  std::atomic<uint64_t> intents{0}, expired_intents{0}, deferred_intents{0};
  // The intent index's size, set by the planner under intent_mu_.
  std::atomic<uint64_t> intent_bytes{0}, intent_bytes_max{0}, intent_pairs{0}, intent_pairs_max{0};
  std::atomic<uint64_t> planner_io_errors{0};
  std::atomic<uint64_t> cleaned_ahead{0}, cleaner_io_errors{0};
  std::atomic<uint64_t> planner_rounds{0}, planner_round_us_total{0}, planner_round_us_max{0};
};

// The file access of the SSD tier, replaced by tests that inject faults or
// simulate a power loss. Not owned; each must outlive the store.
struct SsdEnvs {
  io::Env* env = nullptr;               // native backend; null: options.faults decides
  rocksdb::Env* rocksdb_env = nullptr;  // RocksDB backend; null: RocksDB's default
};

class StoreImpl final : public Store {
 public:
  // REQUIRES: envs.env is not combined with options.faults.
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options,
                                             const std::vector<TableOptions>& tables,
                                             const SsdEnvs& envs = {});
  ~StoreImpl() override;

  Result<WorkerId> RegisterWorker(int device) override EXCLUDES(workers_.register_mu);
  Status Intent(WorkerId worker, TableId table, std::span<const Key> keys, Clock start,
                Clock end) override;
  Status Intent(WorkerId worker, std::span<const TableKeys> keys, Clock start, Clock end) override;
  Status AdvanceClock(WorkerId worker) override;
  Result<Clock> CurrentClock(WorkerId worker) const override;
  Status Pull(WorkerId worker, TableId table, std::span<const Key> keys, float* out,
              void* stream) override;
  Status Push(WorkerId worker, TableId table, std::span<const Key> keys, const float* grads,
              void* stream) override;
  Status DrainIntents() override EXCLUDES(planner_.mu);
  Status ScanTable(TableId table,
                   const std::function<Status(Key, std::span<const float>)>& fn) override;
  Status Checkpoint() override;
  StoreStats Stats() const override;
  Result<TableId> FindTable(const std::string& name) const override;
  const std::vector<TableOptions>& Tables() const override { return table_options_; }
  Status Close() override EXCLUDES(close_.mu);

 private:
  struct Table {
    // Constant after Open.
    TableId id = 0;
    std::string name;
    uint32_t dim = 0;
    uint32_t row_floats = 0;
    uint32_t row_bytes = 0;
    uint64_t t0_share = 0;     // this table's weighted share of device_rows_max
    uint64_t t0_rows_cap = 0;  // the most rows its T0 slots take (share x (1 + growth))
    kernels::InitializerOptions init;
    OptimizerOptions optimizer;

    // Rows resident in its T0: written under mu after every change, read
    // without it to sum T0 across tables (MakeT0Room).
    std::atomic<uint64_t> t0_rows{0};
    // Keys pinned in T0 by acted intents: changed under mu, read without it
    // to bound the pins of all tables together.
    std::atomic<uint64_t> intent_pinned{0};

    base::Mutex mu;
    std::unique_ptr<DeviceTier> t0 GUARDED_BY(mu);
    // Host scratch of Pull and Push (kept, so the data path allocates
    // nothing once grown): per-key next uses, keys mixed for the frequency
    // sketch, the batch's distinct keys on the slow path.
    std::vector<int64_t> next_use GUARDED_BY(mu);
    std::vector<Key> sketch_keys GUARDED_BY(mu);
    std::vector<Key> batch_unique GUARDED_BY(mu);
    KeyDedup dedup GUARDED_BY(mu);
  };
  struct PendingIntent {
    TableId table;
    Clock start;
    Clock end;
    uint64_t offset;
    uint64_t count;
  };
  // A chunked Push that failed after applying some of its distinct keys
  // (store_push_retry.cc): the call, by strong hashes, and how far it got.
  struct PartialPush {
    TableId table = 0;
    uint64_t keys = 0;                     // keys.size() of the call
    std::array<uint64_t, 2> keys_hash{};   // XXH3-128 of the keys' bytes
    std::array<uint64_t, 2> grads_hash{};  // XXH3-128 of the gradients' bytes
    uint64_t distinct = 0;                 // its distinct keys
    uint64_t applied = 0;  // the first `applied` of them (first-occurrence order) are applied
  };
  struct Worker {
    std::atomic<Clock> clock{0};
    int device = -1;
    base::Mutex inbox_mu;  // a leaf
    std::vector<PendingIntent> inbox GUARDED_BY(inbox_mu);
    std::vector<Key> inbox_keys GUARDED_BY(inbox_mu);
    std::unique_ptr<RateEstimator> estimator;  // planner thread only
    // The worker's chunked Push that failed part-way, if any. Its own calls
    // come from one thread at a time; the mutex is for Checkpoint, which
    // reads every worker's. `has_partial_push` mirrors whether it is set, so
    // a Push without one takes no lock.
    std::atomic<bool> has_partial_push{false};
    base::Mutex push_mu ACQUIRED_AFTER(Table::mu);  // a leaf
    std::optional<PartialPush> partial_push GUARDED_BY(push_mu);
  };
  // Workers are registered once and never removed: slots [0, count) are set
  // and stay, so readers index them after an acquire load of count.
  struct Workers {
    std::array<std::unique_ptr<Worker>, kWorkersMax> slots;
    std::atomic<uint32_t> count{0};
    base::Mutex register_mu;                                     // a leaf
    std::vector<Clock> restored_clocks GUARDED_BY(register_mu);  // from the checkpoint meta
  };
  // Unpins and next-use changes collected under intent_mu_, applied per table.
  struct KeyUpdate {
    TableId table;
    Key key;
    Clock next_use;  // kClockNever: no intent left
    bool unpin;
  };
  // The fallback order of rows without intent, store-wide so that T1 (shared
  // by all tables) compares rows of different tables on one scale: an access
  // sequence for recency and, with FallbackPolicy::kLfu, one frequency sketch
  // over (table, key).
  struct Fallback {
    std::atomic<uint64_t> access_seq{0};
    base::Mutex mu ACQUIRED_AFTER(Table::mu);                   // a leaf
    std::unique_ptr<FrequencySketch> sketch PT_GUARDED_BY(mu);  // kLfu only; set at Open
  };
  // A background thread and the leaf mutex it waits on. Its loop returns once
  // it sees `stop`.
  struct BackgroundThread {
    std::thread thread;
    base::Mutex mu ACQUIRED_AFTER(Table::mu);  // a leaf
    base::CondVar cv;                          // with mu: work to do, or stop
    bool stop GUARDED_BY(mu) = false;

    // Sets stop, wakes the thread and joins it.
    void Stop() EXCLUDES(mu) {
      {
        base::MutexLock lock(&mu);
        stop = true;
      }
      cv.SignalAll();
      if (thread.joinable()) thread.join();
    }
  };
  // The planner thread and what it shares with DrainIntents and Checkpoint.
  struct Planner : BackgroundThread {
    uint64_t requested GUARDED_BY(mu) = 0;  // drains asked for
    uint64_t completed GUARDED_BY(mu) = 0;  // drains done
    Status error GUARDED_BY(mu);            // sticky background error
  };
  // The cleaner thread: writes T1's dirty rows ahead of their eviction so the
  // inserts that evict them do no SSD writes. Kicked by every demotion.
  struct Cleaner : BackgroundThread {
    uint64_t kicks GUARDED_BY(mu) = 0;  // rows T0 demoted into T1 since start
  };
  struct CloseState {
    base::Mutex mu ACQUIRED_BEFORE(calls_mu, Table::mu, BackgroundThread::mu);
    std::atomic<bool> closed{false};       // no new calls; set first
    bool finished GUARDED_BY(mu) = false;  // Close wrote everything down
    // Calls that use the tiers (Pull, Push, ScanTable, Checkpoint, Stats)
    // in flight: Close waits for none before it writes rows down, and
    // releases the tiers (and the directory's lock) only after that.
    std::atomic<uint64_t> calls{0};
    base::Mutex calls_mu ACQUIRED_BEFORE(Table::mu);
    base::CondVar calls_done;  // signalled when `calls` reaches 0 after `closed`
    // Stats as Close left them, returned by Stats() once the tiers are gone.
    StoreStats final_stats GUARDED_BY(calls_mu);
    bool tiers_released GUARDED_BY(calls_mu) = false;
  };
  // One call that uses the tiers, from its start to its return. status() is
  // FailedPrecondition when the store is closed (the call must return it).
  class CallScope {
   public:
    explicit CallScope(const StoreImpl* store);
    ~CallScope();
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;
    Status status() const;

   private:
    CloseState* close_;
    const std::string* dir_;
    bool closed_;
  };

  StoreImpl(const StoreOptions& options, const std::vector<TableOptions>& tables);

  // Open and Close (store_open.cc).
  Status LockDir();
  Status Init() EXCLUDES(workers_.register_mu);
  // After a failed Init of a store Open created: removes what it wrote (the
  // directory itself, or the LOCK file, when Open created them), so the
  // directory is as it was.
  void RemoveCreated();
  // Waits for the calls in flight (CallScope) after `closed` was set.
  void WaitForCalls() EXCLUDES(close_.calls_mu);
  // Stats from the tiers (Stats() returns final_stats once they are gone).
  StoreStats LiveStats() const;
  Result<io::Env*> MakeSsdEnv();

  // Argument checks (store_checks.cc): InvalidArgument or FailedPrecondition
  // naming what is wrong, nothing changed.
  static Status ValidateOptions(const StoreOptions& options,
                                const std::vector<TableOptions>& tables);
  Status CheckOpen() const;
  Status CheckWorker(WorkerId worker) const;
  Status CheckTable(TableId table) const;
  Status CheckBatch(std::span<const Key> keys, const void* data, const char* what) const;
  Status CheckDataCall(WorkerId worker, TableId table, std::span<const Key> keys, const void* data,
                       const char* what) const;

  // The checkpoint meta (store_workers.cc): tables and worker clocks.
  std::vector<std::byte> EncodeMeta() const;
  Status RestoreMeta(std::span<const std::byte> meta) EXCLUDES(workers_.register_mu);

  // The data path (store_data.cc). REQUIRES: table.mu held.
  uint64_t PullRoom(const Table& table) const REQUIRES(table.mu);
  // The next uses a Pull's pass gives `keys`: *all when every key gets the
  // same, else per key in table.next_use (returned span).
  Result<std::span<const int64_t>> PassNextUses(Table& table, std::span<const Key> keys,
                                                int64_t* all) REQUIRES(table.mu)
      EXCLUDES(intent_mu_, fallback_.mu);
  // Counts the keys whose gradient holds a NaN or an infinity; with
  // refuse_nonfinite_grads, InvalidArgument naming the first when any does.
  Status CheckGradients(const Table& table, std::span<const Key> keys, const float* grads,
                        void* stream) REQUIRES(table.mu);
  Result<bool> BringInMisses(Table& table, std::span<const Key> keys, bool count_access)
      REQUIRES(table.mu) EXCLUDES(intent_mu_, fallback_.mu);
  Status PullMisses(Table& table, std::span<const Key> keys, std::span<const int64_t> next_use,
                    int64_t next_use_all, float* out, void* stream) REQUIRES(table.mu)
      EXCLUDES(intent_mu_, fallback_.mu);
  Status PullChunked(Table& table, std::span<const Key> keys, std::span<const Key> unique_keys,
                     float* out, bool first_pass, void* stream) REQUIRES(table.mu)
      EXCLUDES(intent_mu_, fallback_.mu);
  // `may_resume`: the worker's partial Push is on this table with as many
  // keys (PushMayResume); when it is the same call, only the distinct keys
  // after its applied prefix are applied.
  Status PushChunked(Table& table, Worker& worker, std::span<const Key> keys,
                     std::span<const Key> unique_keys, const float* grads, bool may_resume,
                     void* stream) REQUIRES(table.mu) EXCLUDES(worker.push_mu);

  // A chunked Push that failed part-way (store_push_retry.cc).
  // Whether the worker's partial Push may be this call (same table, as many
  // keys): true keeps it for PushChunked to compare; false forgets it.
  bool PushMayResume(Worker& worker, TableId table, uint64_t keys) EXCLUDES(worker.push_mu);
  // The call's hashes (keys and the gradients, host memory).
  static PartialPush DescribePush(TableId table, std::span<const Key> keys,
                                  std::span<const float> grads, uint64_t distinct);
  // The distinct keys of `call` already applied when the worker's partial
  // Push is the same call, else 0 (and it is forgotten).
  uint64_t AppliedBefore(Worker& worker, const PartialPush& call) EXCLUDES(worker.push_mu);
  // Remembers that `call` applied its first `applied` distinct keys, and
  // returns `failure` (its code kept) saying so and that a retry of the same
  // Push applies only the rest.
  Status RememberPartialPush(Worker& worker, const Table& table, PartialPush call, uint64_t applied,
                             const Status& failure) EXCLUDES(worker.push_mu);
  void ForgetPartialPush(Worker& worker) EXCLUDES(worker.push_mu);
  // FailedPrecondition naming the first worker with a partial Push: a
  // checkpoint must not hold half a Push.
  Status CheckNoPartialPush() const;

  // Tier movement (store_tiers.cc). REQUIRES: table.mu held.
  // Brings `unique_keys` (distinct) into T0; *brought_in: how many were not
  // resident. `count_access`: a Pull (the rows brought in count as stalls).
  Status MakeResident(Table& table, std::span<const Key> unique_keys, bool count_access,
                      uint64_t* brought_in) REQUIRES(table.mu);
  Status FetchRows(Table& table, std::span<const Key> keys, std::vector<float>* rows,
                   std::vector<uint8_t>* dirty, std::vector<uint8_t>* from_t1) REQUIRES(table.mu);
  // MakeResident's room in T0 and insertion of the `missing` rows fetched.
  Status PlaceInT0(Table& table, std::span<const Key> unique_keys, std::span<const Key> present,
                   std::span<const Key> missing, const std::vector<float>& rows,
                   const std::vector<uint8_t>& dirty) REQUIRES(table.mu) EXCLUDES(cleaner_.mu);
  Status EvictFromT0(Table& table, uint64_t count) REQUIRES(table.mu) EXCLUDES(cleaner_.mu);
  // Rows resident in T0, all tables together (each table's last count).
  uint64_t T0Rows() const;
  // Intent pins in T0, all tables together.
  uint64_t T0IntentPins() const;

  // The cleaner thread (store_tiers.cc).
  void CleanerLoop() EXCLUDES(cleaner_.mu);
  void KickCleaner(uint64_t rows) EXCLUDES(cleaner_.mu);

  // The eviction order (store_eviction.cc).
  int64_t FallbackValue(uint64_t freq, uint64_t seq) const;
  Status NextUses(Table& table, std::span<const Key> keys, std::vector<int64_t>* next_use)
      REQUIRES(table.mu) EXCLUDES(intent_mu_, fallback_.mu);
  // Counts an access of each key in the LFU fallback's sketch (repeats count).
  void CountAccess(Table& table, std::span<const Key> keys) REQUIRES(table.mu)
      EXCLUDES(fallback_.mu);
  Status RefreshNextUse(Table& table, std::span<const Key> keys, bool with_t1) REQUIRES(table.mu)
      EXCLUDES(intent_mu_, fallback_.mu);
  // Frees `count` T0 rows store-wide: the unpinned rows with the largest
  // next_use among `table` and every other table whose lock it gets without
  // waiting (TryLock; a table busy elsewhere sits this one out), demoted to
  // T1. No wait on a second table lock, so no lock-order cycle.
  Status MakeT0Room(Table& table, uint64_t count) REQUIRES(table.mu)
      EXCLUDES(cleaner_.mu) NO_THREAD_SAFETY_ANALYSIS;

  // Intents and the planner (store_intent.cc).
  void PlannerLoop() EXCLUDES(planner_.mu);
  Result<bool> PlannerRound() EXCLUDES(intent_mu_);  // true: due work is left for another round
  // Moves the inboxes into the index; appends each new window's keys to
  // (*added_keys)[table].
  void DrainInboxes(std::vector<std::vector<Key>>* added_keys) REQUIRES(apply_mu_)
      EXCLUDES(intent_mu_);
  // DrainInboxes and ApplyNewIntents now, on the caller's thread, when any
  // intent waits in an inbox: a Pull's eviction then sees every intent given
  // before it, not only those the planner's last round took.
  Status ApplyWaitingIntents() EXCLUDES(apply_mu_, intent_mu_);
  Status ApplyNewIntents(std::vector<std::vector<Key>>& added_keys) REQUIRES(apply_mu_)
      EXCLUDES(intent_mu_);
  Status ApplyKeyUpdates(std::vector<KeyUpdate>& updates) EXCLUDES(intent_mu_);
  Status ActOnWindows(Table& table, std::span<IntentWindow* const> windows, Clock worker_clock)
      EXCLUDES(table.mu, intent_mu_);
  Status PlannerError() EXCLUDES(planner_.mu);
  // Publishes the index's tracked keys and size (Stats, fast paths).
  void NoteIntentIndexSize() REQUIRES(intent_mu_);

  // Checkpoint (store_checkpoint.cc).
  Status WriteBackT0(Table& table) REQUIRES(table.mu);

  // Constant after Open.
  StoreOptions options_;
  std::vector<TableOptions> table_options_;
  kernels::Runner runner_ = kernels::Runner::kHost;
  std::vector<std::unique_ptr<Table>> tables_;
  // The directory's LOCK, held from before Open reads anything in it until
  // Close has written everything down (or the store is destroyed: declared before
  // the tiers, so released after them).
  std::unique_ptr<io::FileLock> dir_lock_;
  struct Created {
    bool dir = false;    // Open created the directory
    bool lock = false;   // ... or only its LOCK file
    bool store = false;  // Open found no store there (a failed Init undoes it)
  };
  Created created_;
  std::unique_ptr<io::FaultEnv> fault_env_;  // set when options_.faults asks for faults
  SsdEnvs ssd_envs_;                         // given to Open; not owned
  std::unique_ptr<storage::RowStore> ssd_;
  std::unique_ptr<storage::DramCache> dram_;

  Workers workers_;

  // Inbox entries not drained yet (Intent adds, DrainInboxes subtracts,
  // both under the worker's inbox_mu).
  std::atomic<uint64_t> intents_waiting_{0};
  base::Mutex apply_mu_ ACQUIRED_BEFORE(Table::mu);
  std::vector<std::vector<Key>> apply_keys_ GUARDED_BY(apply_mu_);  // new keys per table

  base::Mutex intent_mu_ ACQUIRED_AFTER(Table::mu);
  IntentIndex intents_ GUARDED_BY(intent_mu_);
  std::atomic<uint64_t> tracked_keys_{0};  // intents_.TrackedKeys(), for lock-free fast paths

  Fallback fallback_;
  Planner planner_;
  Cleaner cleaner_;
  mutable CloseState close_;
  mutable StoreCounters counters_;
};

}  // namespace strata::engine
