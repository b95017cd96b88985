// StoreImpl: the Store behind include/strata/store.h.
//
// Tiers: T0 is one kernels::DeviceTable per table (GPU memory, or its host
// twin); T1 is one storage::DramCache shared by all tables; T2 is a
// storage::RowStore (native SSD store or RocksDB). The hierarchy is
// exclusive: a row promoted to T0 leaves T1; a row evicted from T0 is demoted
// into T1 with its dirty flag; T1 writes dirty rows to T2 before reusing their
// slots and drops clean ones. A row never seen is created in T0 by the
// table's deterministic initializer (so dropping it clean loses nothing).
//
// T0 eviction order is the device table's "largest next_use first": a row
// with an intent has next_use = the start of its nearest window (Belady on
// the known future); a row without has next_use >= kFallbackBase, ordered by
// the fallback policy (LRU: older accesses are larger), so it goes first.
//
// Locking: each table has a mutex guarding its T0 table and every movement of
// its rows between tiers; intent_mu_ guards the IntentIndex. Order: a table
// mutex before intent_mu_; never two table mutexes at once except in
// Checkpoint/Close (ascending ids). Worker inboxes have their own leaf mutex.
// Files: store_open.cc (open, workers, meta, close), store_intent.cc (intents
// and the planner), store_data.cc (pull, push, tier movement),
// store_checkpoint.cc (checkpoint, scan, stats).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "engine/action_timing.h"
#include "engine/fault_spec.h"
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
  std::atomic<uint64_t> pulls{0}, pushes{0}, stall_pulls{0};
  std::atomic<uint64_t> prefetched_rows{0}, late_prefetches{0};
  std::atomic<uint64_t> intents{0}, expired_intents{0}, deferred_intents{0};
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

  Result<WorkerId> RegisterWorker(int device) override EXCLUDES(register_mu_);
  Status Intent(WorkerId worker, TableId table, std::span<const Key> keys, Clock start,
                Clock end) override;
  Status Intent(WorkerId worker, std::span<const TableKeys> keys, Clock start, Clock end) override;
  Status AdvanceClock(WorkerId worker) override;
  Result<Clock> CurrentClock(WorkerId worker) const override;
  Status Pull(WorkerId worker, TableId table, std::span<const Key> keys, float* out,
              void* stream) override;
  Status Push(WorkerId worker, TableId table, std::span<const Key> keys, const float* grads,
              void* stream) override;
  Status DrainIntents() override EXCLUDES(planner_mu_);
  Status ScanTable(TableId table,
                   const std::function<Status(Key, std::span<const float>)>& fn) override;
  Status Checkpoint() override;
  StoreStats Stats() const override;
  Result<TableId> FindTable(const std::string& name) const override;
  const std::vector<TableOptions>& Tables() const override { return table_options_; }
  Status Close() override EXCLUDES(close_mu_);

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
    kernels::OptimizerOptions optimizer;

    // The rows it may keep in T0 now: starts at t0_share; the planner lends
    // quota from tables whose T0 evicts colder rows to tables whose T0
    // evicts hotter ones (RebalanceT0). Written by the planner only.
    std::atomic<uint64_t> t0_limit{0};
    // The nearest next_use among the rows of its latest T0 eviction (its
    // marginal row: smaller = hotter); kNoFrontier when it has not evicted
    // since the planner last looked.
    std::atomic<int64_t> evict_frontier{kNoFrontier};
    // Keys pinned in T0 by acted intents: changed under mu, read by the
    // planner's rebalancing without it.
    std::atomic<uint64_t> intent_pinned{0};

    base::Mutex mu;
    std::unique_ptr<kernels::DeviceTable> t0 GUARDED_BY(mu);
    RunnerStaging staging GUARDED_BY(mu);
  };
  struct PendingIntent {
    TableId table;
    Clock start;
    Clock end;
    uint64_t offset;
    uint64_t count;
  };
  struct Worker {
    std::atomic<Clock> clock{0};
    int device = -1;
    base::Mutex inbox_mu;
    std::vector<PendingIntent> inbox GUARDED_BY(inbox_mu);
    std::vector<Key> inbox_keys GUARDED_BY(inbox_mu);
    std::unique_ptr<RateEstimator> estimator;  // planner thread only
  };
  // Unpins and next-use changes collected under intent_mu_, applied per table.
  struct KeyUpdate {
    TableId table;
    Key key;
    Clock next_use;  // kClockNever: no intent left
    bool unpin;
  };

  StoreImpl(const StoreOptions& options, const std::vector<TableOptions>& tables);
  Status Init();
  Result<io::Env*> MakeSsdEnv();
  Status CheckOpen() const;
  Status CheckWorker(WorkerId worker) const;
  Status CheckTable(TableId table) const;
  Status CheckBatch(std::span<const Key> keys, const void* data, const char* what) const;
  Status CheckDataCall(WorkerId worker, TableId table, std::span<const Key> keys, const void* data,
                       const char* what) const;

  // Planner (store_intent.cc).
  void PlannerLoop() EXCLUDES(planner_mu_);
  Result<bool> PlannerRound() EXCLUDES(intent_mu_);  // true: due work is left for another round
  void DrainInboxes(std::vector<IntentWindow*>* added) EXCLUDES(intent_mu_);
  Status ApplyNewIntents(const std::vector<IntentWindow*>& added) EXCLUDES(intent_mu_);
  Status ApplyKeyUpdates(std::vector<KeyUpdate>& updates) EXCLUDES(intent_mu_);
  Status ActOnWindows(Table& table, std::span<IntentWindow* const> windows, Clock worker_clock)
      EXCLUDES(table.mu, intent_mu_);
  void RebalanceT0();

  // Tier movement (store_data.cc). REQUIRES: table.mu held.
  // Brings `unique_keys` (sorted, unique) into T0. `count_access`: a Pull or
  // Push (hits, misses and stalls counted) rather than a prefetch.
  Status MakeResident(Table& table, std::span<const Key> unique_keys, bool count_access,
                      uint64_t* brought_in) REQUIRES(table.mu);
  Status EvictFromT0(Table& table, uint64_t count) REQUIRES(table.mu);
  // Pins or unpins.
  Status PinKeys(Table& table, std::span<const Key> keys, bool pin) REQUIRES(table.mu);
  Status CheckAllFound(Table& table, std::span<const Key> keys) REQUIRES(table.mu);
  Status FetchRows(Table& table, std::span<const Key> keys, std::vector<float>* rows,
                   std::vector<uint8_t>* dirty, std::vector<uint8_t>* from_t1) REQUIRES(table.mu);
  Status Touch(Table& table, std::span<const Key> unique_keys) REQUIRES(table.mu);
  Status RefreshNextUse(Table& table, std::span<const Key> keys, bool with_t1) REQUIRES(table.mu);
  Status StageKeys(Table& table, std::span<const Key> keys, void* stream = nullptr)
      REQUIRES(table.mu);
  Status StageRows(Table& table, std::span<const Key> keys, const float* rows,
                   const int64_t* next_use, const uint8_t* dirty) REQUIRES(table.mu);
  bool NeedsChunks(const Table& table, size_t unique_keys) const REQUIRES(table.mu);
  Status PullChunked(Table& table, std::span<const Key> keys, std::span<const Key> unique_keys,
                     float* out, void* stream) REQUIRES(table.mu);
  Status PushChunked(Table& table, std::span<const Key> keys, std::span<const Key> unique_keys,
                     const float* grads, void* stream) REQUIRES(table.mu);
  Status NextUses(Table& table, std::span<const Key> keys, std::vector<int64_t>* next_use)
      REQUIRES(table.mu) EXCLUDES(intent_mu_, sketch_mu_);
  int64_t FallbackValue(uint64_t freq, uint64_t seq) const;
  uint64_t PullRoom(const Table& table) const REQUIRES(table.mu);

  // Cleaner thread (store_intent.cc): writes T1's dirty rows ahead of their
  // eviction so the inserts that evict them do no SSD writes.
  void CleanerLoop() EXCLUDES(cleaner_mu_);
  void KickCleaner() EXCLUDES(cleaner_mu_);
  void StopCleaner() EXCLUDES(cleaner_mu_);

  // Checkpoint (store_checkpoint.cc). REQUIRES: table.mu held.
  Status WriteBackT0(Table& table) REQUIRES(table.mu);
  std::vector<std::byte> EncodeMeta() const;
  Status RestoreMeta(std::span<const std::byte> meta) EXCLUDES(register_mu_);
  Status StopPlanner() EXCLUDES(planner_mu_);
  Status PlannerError() EXCLUDES(planner_mu_);

  // Constant after Open.
  StoreOptions options_;
  std::vector<TableOptions> table_options_;
  kernels::Runner runner_ = kernels::Runner::kHost;
  std::vector<std::unique_ptr<Table>> tables_;
  std::unique_ptr<io::FaultEnv> fault_env_;  // set when options_.faults asks for faults
  SsdEnvs ssd_envs_;                         // given to Open; not owned
  std::unique_ptr<storage::RowStore> ssd_;
  std::unique_ptr<storage::DramCache> dram_;

  std::array<std::unique_ptr<Worker>, kWorkersMax> workers_;
  std::atomic<uint32_t> num_workers_{0};
  base::Mutex register_mu_;
  std::vector<Clock> restored_clocks_ GUARDED_BY(register_mu_);

  base::Mutex intent_mu_;
  IntentIndex intents_ GUARDED_BY(intent_mu_);
  std::atomic<uint64_t> tracked_keys_{0};  // intents_.TrackedKeys(), for lock-free fast paths

  // The fallback order, store-wide so that T1 (shared by all tables) compares
  // rows of different tables on one scale: an access sequence for recency
  // and, with FallbackPolicy::kLfu, one frequency sketch over (table, key).
  std::atomic<uint64_t> access_seq_{0};
  mutable base::Mutex sketch_mu_;                                      // a leaf lock
  std::unique_ptr<FrequencySketch> sketch_ PT_GUARDED_BY(sketch_mu_);  // kLfu only; set at Open

  uint64_t rebalanced_at_clocks_ = 0;  // planner thread only: sum of clocks at the last RebalanceT0

  std::thread planner_;
  base::Mutex planner_mu_;
  base::CondVar planner_cv_;
  bool planner_stop_ GUARDED_BY(planner_mu_) = false;
  uint64_t planner_requested_ GUARDED_BY(planner_mu_) = 0;  // drains asked for
  uint64_t planner_completed_ GUARDED_BY(planner_mu_) = 0;  // drains done
  Status planner_error_ GUARDED_BY(planner_mu_);            // sticky background error

  std::thread cleaner_;
  base::Mutex cleaner_mu_;
  base::CondVar cleaner_cv_;
  bool cleaner_stop_ GUARDED_BY(cleaner_mu_) = false;
  uint64_t cleaner_kicks_ GUARDED_BY(cleaner_mu_) = 0;  // T1 inserts since start

  base::Mutex close_mu_;
  std::atomic<bool> closed_{false};
  bool close_finished_ GUARDED_BY(close_mu_) = false;  // Close wrote everything down
  mutable StoreCounters counters_;
};

}  // namespace strata::engine
