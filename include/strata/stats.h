// Counters of a Store, per tier and for the planner. A snapshot: plain values.
#pragma once

#include <cstdint>
#include <string>

namespace strata {

struct TierStats {
  uint64_t hits = 0;      // lookups served by this tier (T0: keys of Pulls, repeats included)
  uint64_t misses = 0;    // lookups that went below it (T0: hits + misses = pulls)
  uint64_t rows_in = 0;   // rows moved into this tier (from below or created)
  uint64_t rows_out = 0;  // rows moved out (evicted down or dropped clean)
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint64_t evictions = 0;
  uint64_t dirty_writebacks = 0;  // dirty rows written down a tier
  uint64_t rows = 0;              // rows resident now
  uint64_t rows_max = 0;          // capacity in rows
};

struct StoreStats {
  TierStats t0;  // device tier
  TierStats t1;  // DRAM tier
  uint64_t ssd_row_reads = 0;
  uint64_t ssd_row_writes = 0;

  // T2's own counts: bytes it wrote to its device (its merges and garbage
  // collection included) and row bytes it was handed to write.
  uint64_t ssd_bytes_written = 0;
  uint64_t ssd_user_bytes_written = 0;
  // Native format 2: merges (key ranges) and cleaning steps completed, and
  // those that failed (each retried after a back-off; docs/ssd-format.md,
  // "Merge and cleaning errors"). 0 for format 1 and RocksDB.
  uint64_t ssd_merges = 0;
  uint64_t ssd_merge_failures = 0;

  uint64_t pulls = 0;   // keys pulled
  uint64_t pushes = 0;  // keys pushed
  // Keys pushed (repeats included) whose gradient held a NaN or an infinity,
  // applied or refused (TableOptions::refuse_nonfinite_grads).
  uint64_t nonfinite_grads = 0;
  uint64_t stall_pulls = 0;       // distinct keys Pulls had to fetch synchronously
  uint64_t prefetched_rows = 0;   // rows moved up by the planner
  uint64_t late_prefetches = 0;   // prefetched after their window had opened
  uint64_t intents = 0;           // keys signalled
  uint64_t expired_intents = 0;   // keys ignored: window already over
  uint64_t deferred_intents = 0;  // intents waiting: T0 full of pinned rows (overload)
  uint64_t intent_bytes = 0;      // memory of the planner's intent index now (heap bytes)
  uint64_t intent_bytes_max = 0;  // the most it held since Open
  uint64_t intent_pairs = 0;      // (key, window) pairs pending in the index now
  uint64_t intent_pairs_max = 0;  // the most since Open
  uint64_t planner_rounds = 0;
  uint64_t planner_io_errors = 0;  // prefetch rounds cut short by an I/O error (retried)
  uint64_t cleaned_ahead = 0;      // dirty T1 rows written to SSD ahead of their eviction
  uint64_t cleaner_io_errors = 0;  // clean-ahead passes cut short by an I/O error (retried)
  uint64_t planner_round_us_max = 0;
  double planner_round_us_mean = 0;
  bool t0_on_gpu = false;

  std::string ToString() const;
};

}  // namespace strata
