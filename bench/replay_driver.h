// The replay driver behind `strata replay` and `strata bench sweep`: drives a
// Store, through its public API only, with the batches of a trace.
//
// One loader thread per worker reads the trace (its own reader: batch j of
// the file belongs to worker j % workers) and signals each batch's keys as an
// intent `lookahead` batches before the worker reaches it; the worker pulls
// every table of the batch, pushes deterministic synthetic gradients and
// advances its clock. With `intents` off the loader only feeds batches.
//
// With `verify`, every pulled row is checked against a model of all pushes
// (verify_model.h) and, at the end, every row of every table: through
// ScanTable (each key exactly once), or with injected faults through Pulls of
// every key in retried chunks (a scan of a large table rarely gets through
// without an error). The first mismatch stops the run with a Corruption
// naming the table, key, batch and worker.
//
// Thread safety: RunReplay is called from one thread and runs its own; the
// progress callback is called from the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "strata/options.h"
#include "strata/stats.h"
#include "strata/status.h"
#include "strata/store.h"

namespace strata::bench {

class VerifyModel;

// The largest lookahead and simulated compute per batch a replay accepts.
inline constexpr uint64_t kReplayLookaheadMax = 1024;
inline constexpr uint64_t kReplayComputeUsMax = 10'000'000;

struct ReplayOptions {
  std::string trace;
  std::string dir;                 // the store's directory: must be empty or missing
  uint64_t device_rows = 1 << 16;  // T0 rows
  uint64_t dram_rows = 1 << 18;    // T1 rows
  uint32_t dram_shards = 0;        // T1 shards (StoreOptions::dram_shards; 0: automatic)
  uint64_t lookahead = 2;          // batches intents run ahead of the worker
  bool intents = true;
  uint32_t workers = 0;  // 0: the trace's worker count
  bool verify = false;
  uint32_t dim = 16;
  FallbackPolicy fallback = FallbackPolicy::kLru;
  SsdBackend ssd_backend = SsdBackend::kNative;
  FaultOptions faults;       // injected into the store's SSD I/O (default: none)
  uint64_t batches_max = 0;  // stop after this many batches (0: all)
  // Simulated model compute per batch, between the pulls and the pushes (a
  // trainer's forward and backward pass): the time the planner has to
  // prefetch the next batches. 0: the worker only calls the store.
  uint64_t compute_us = 0;
  // T0 on the GPU when one is visible (rows staged through device memory,
  // bench/row_staging.h); false keeps it on the host runner.
  bool use_gpu = true;
  // StoreOptions::device_share_growth_max: how far one table's T0 may grow.
  double device_share_growth = 0.25;
  // StoreOptions::intent_act_ahead_max (0: AdaPM's horizon alone).
  uint32_t act_ahead_max = StoreOptions{}.intent_act_ahead_max;
  // StoreOptions::ssd_write_log_fraction (0: every put rewrites its leaf).
  double ssd_write_log_fraction = 0.25;
  // StoreOptions::ssd_format_version (1 or 2) of a new SSD tier directory.
  uint32_t ssd_format_version = StoreOptions{}.ssd_format_version;
  // StoreOptions::ssd_index: format 2's layout and DRAM index.
  SsdIndex ssd_index = StoreOptions{}.ssd_index;
  // StoreOptions::ssd_range_bits: key ranges of a new table (ssd_index kRanges).
  uint32_t ssd_range_bits = StoreOptions{}.ssd_range_bits;
  // Checkpoint once the batches are done, so the SSD tier's deferred merges
  // are paid (and counted in ssd_bytes_written) inside the run.
  bool checkpoint_at_end = false;
  // Attempts of one store call failing with IOError or ResourceExhausted
  // (the parts of a split Pull included) before the run fails.
  uint32_t attempts_max = 1000;
  // When set, every row at the end of the run is written here, one line per
  // row sorted by table and key (row_export.h), to compare two runs.
  std::string export_path;
};

struct ReplayReport {
  uint64_t batches = 0;
  uint64_t pulls = 0;  // keys pulled
  uint64_t stall_pulls = 0;
  double stall_fraction = 0;
  uint64_t ssd_row_reads = 0;
  uint64_t ssd_row_writes = 0;
  // SSD tier device bytes written and row bytes handed to it, counted after
  // Close (and the final checkpoint when asked), merges and GC included.
  uint64_t ssd_bytes_written = 0;
  uint64_t ssd_user_bytes_written = 0;
  double ssd_write_amp = 0;  // ssd_bytes_written / ssd_user_bytes_written
  double rows_per_s = 0;     // keys pulled per second of replay
  double elapsed_s = 0;
  uint64_t cache_rows = 0;  // rows that fit above SSD (T0 + T1)
  uint64_t t0_hits = 0;
  uint64_t t1_hits = 0;
  uint64_t t2_hits = 0;         // lookups served from SSD
  uint64_t verified_rows = 0;   // pulled rows checked against the model (0 without verify)
  uint64_t scanned_rows = 0;    // rows checked at the end (scan, or pulls under faults)
  uint64_t retried_errors = 0;  // store calls retried after IOError / ResourceExhausted
  StoreStats stats;
};

struct ReplayProgress {
  uint64_t batches_done = 0;
  uint64_t batches_total = 0;  // 0 when unknown
  double elapsed_s = 0;
  uint64_t pulls = 0;
};

using ProgressFn = std::function<void(const ReplayProgress&)>;
// Opens the store to replay against: Store::Open for the CLI, a model store
// in the driver's own tests.
using StoreOpener = std::function<Result<std::unique_ptr<Store>>(const StoreOptions&,
                                                                 const std::vector<TableOptions>&)>;

// What a replay needs before its store opens, read from the options and the
// trace: the batches to run, the workers, the verification model (with
// `verify`), the store's options and its tables (SGD with learning rate 1,
// T0 split by each table's distinct keys per batch).
struct ReplayPlan {
  ReplayPlan();
  ReplayPlan(ReplayPlan&&) noexcept;
  ~ReplayPlan();
  uint64_t batches_total = 0;
  uint32_t workers = 0;
  std::unique_ptr<VerifyModel> model;
  StoreOptions store;
  std::vector<TableOptions> tables;
};

// Checks the options, reads the trace once (a corrupt trace fails here) and
// builds the plan; `check_dir`: refuse a store directory that is not empty.
Result<ReplayPlan> PlanReplay(const ReplayOptions& options, bool check_dir);

// Runs the replay; `progress` (may be empty) is called about every 200 ms.
Result<ReplayReport> RunReplay(const ReplayOptions& options, const StoreOpener& open,
                               const ProgressFn& progress);

}  // namespace strata::bench
