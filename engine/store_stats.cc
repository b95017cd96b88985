// Stats: the store's counters, with T1's and T2's own, and their text form.
#include <cstdio>

#include "engine/store_impl.h"

namespace strata {

std::string StoreStats::ToString() const {
  char buf[1024];
  std::snprintf(
      buf, sizeof(buf),
      "T0(%s): hits %llu misses %llu rows %llu/%llu in %llu evicted %llu dirty-out %llu | "
      "T1: hits %llu misses %llu rows %llu/%llu evicted %llu written back %llu "
      "(cleaned ahead %llu) | "
      "SSD: row reads %llu row writes %llu | pulls %llu pushes %llu (non-finite %llu) stalls %llu "
      "prefetched %llu (late %llu) intents %llu (expired %llu, deferred %llu, %llu bytes "
      "for %llu pending) | "
      "planner rounds %llu mean %.1f us max %llu us",
      t0_on_gpu ? "GPU" : "host", (unsigned long long)t0.hits, (unsigned long long)t0.misses,
      (unsigned long long)t0.rows, (unsigned long long)t0.rows_max, (unsigned long long)t0.rows_in,
      (unsigned long long)t0.evictions, (unsigned long long)t0.dirty_writebacks,
      (unsigned long long)t1.hits, (unsigned long long)t1.misses, (unsigned long long)t1.rows,
      (unsigned long long)t1.rows_max, (unsigned long long)t1.evictions,
      (unsigned long long)t1.dirty_writebacks, (unsigned long long)cleaned_ahead,
      (unsigned long long)ssd_row_reads, (unsigned long long)ssd_row_writes,
      (unsigned long long)pulls, (unsigned long long)pushes, (unsigned long long)nonfinite_grads,
      (unsigned long long)stall_pulls, (unsigned long long)prefetched_rows,
      (unsigned long long)late_prefetches, (unsigned long long)intents,
      (unsigned long long)expired_intents, (unsigned long long)deferred_intents,
      (unsigned long long)intent_bytes, (unsigned long long)intent_pairs,
      (unsigned long long)planner_rounds, planner_round_us_mean,
      (unsigned long long)planner_round_us_max);
  return buf;
}

namespace engine {

StoreStats StoreImpl::Stats() const {
  CallScope call(this);
  if (!call.status().ok()) {
    base::MutexLock lock(&close_.calls_mu);
    if (close_.tiers_released) return close_.final_stats;
  }
  // Open, or closing with its tiers still there (a failed Close keeps them).
  return LiveStats();
}

StoreStats StoreImpl::LiveStats() const {
  StoreStats s;
  const StoreCounters& c = counters_;
  s.t0_on_gpu = runner_ == kernels::Runner::kGpu;
  s.t0.hits = c.t0_hits.load();
  s.t0.misses = c.t0_misses.load();
  s.t0.rows_in = c.t0_rows_in.load();
  s.t0.rows_out = c.t0_rows_out.load();
  s.t0.bytes_in = c.t0_bytes_in.load();
  s.t0.bytes_out = c.t0_bytes_out.load();
  s.t0.evictions = c.t0_evictions.load();
  s.t0.dirty_writebacks = c.t0_dirty_out.load();
  s.t0.rows_max = options_.device_rows_max;
  for (const auto& t : tables_) {
    base::MutexLock lock(&t->mu);
    s.t0.rows += t->t0->Size();
  }
  if (dram_) {
    storage::DramCacheStats d = dram_->Stats();
    s.t1.hits = c.t1_hits.load();
    s.t1.misses = c.t1_misses.load();
    s.t1.rows = d.rows;
    s.t1.rows_max = options_.dram_rows_max;
    s.t1.evictions = d.evictions;
    s.t1.dirty_writebacks = d.dirty_writebacks;
    s.t1.rows_in = d.inserts;
  }
  if (ssd_) {
    storage::RowStoreStats r = ssd_->Stats();
    s.ssd_row_reads = c.ssd_row_reads.load();
    s.ssd_row_writes = r.rows_written;
    s.ssd_bytes_written = r.bytes_written;
    s.ssd_user_bytes_written = r.user_bytes_written;
    s.ssd_merges = r.merges;
    s.ssd_merge_failures = r.merge_failures;
  }
  s.pulls = c.pulls.load();
  s.pushes = c.pushes.load();
  s.nonfinite_grads = c.nonfinite_grads.load();
  s.stall_pulls = c.stall_pulls.load();
  s.prefetched_rows = c.prefetched_rows.load();
  s.late_prefetches = c.late_prefetches.load();
  s.intents = c.intents.load();
  s.expired_intents = c.expired_intents.load();
  s.deferred_intents = c.deferred_intents.load();
  s.intent_bytes = c.intent_bytes.load();
  s.intent_bytes_max = c.intent_bytes_max.load();
  s.intent_pairs = c.intent_pairs.load();
  s.intent_pairs_max = c.intent_pairs_max.load();
  s.planner_rounds = c.planner_rounds.load();
  s.planner_io_errors = c.planner_io_errors.load();
  s.cleaned_ahead = c.cleaned_ahead.load();
  s.cleaner_io_errors = c.cleaner_io_errors.load();
  s.planner_round_us_max = c.planner_round_us_max.load();
  s.planner_round_us_mean =
      s.planner_rounds ? double(c.planner_round_us_total.load()) / double(s.planner_rounds) : 0;
  return s;
}

}  // namespace engine
}  // namespace strata
