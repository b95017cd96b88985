// Cluster::Stats and SummedStats: the shard's StoreStats and the exchange's
// counters; summed over ranks by one MPI_Allreduce of every counter.
// planner_round_us_max and planner_round_us_mean stay this rank's, and
// t0_on_gpu is this rank's.
#include "cluster/cluster_impl.h"

namespace strata::cluster {
namespace {

// Every summable counter of ClusterStats, in one order for packing.
template <typename Fn>
void ForEachCounter(ClusterStats& s, Fn fn) {
  for (TierStats* t : {&s.store.t0, &s.store.t1}) {
    for (uint64_t* v :
         {&t->hits, &t->misses, &t->rows_in, &t->rows_out, &t->bytes_in, &t->bytes_out,
          &t->evictions, &t->dirty_writebacks, &t->rows, &t->rows_max}) {
      fn(v);
    }
  }
  StoreStats& st = s.store;
  for (uint64_t* v : {&st.ssd_row_reads, &st.ssd_row_writes, &st.pulls, &st.pushes, &st.stall_pulls,
                      &st.prefetched_rows, &st.late_prefetches, &st.intents, &st.expired_intents,
                      &st.deferred_intents, &st.planner_rounds, &st.planner_io_errors,
                      &st.cleaned_ahead, &st.cleaner_io_errors}) {
    fn(v);
  }
  ClusterExchangeStats& e = s.exchange;
  for (uint64_t* v : {&e.pull_calls, &e.push_calls, &e.keys_sent, &e.keys_served, &e.bytes_sent,
                      &e.bytes_received, &e.intents_sent, &e.exchange_us, &e.bytes_forwarded,
                      &e.exchange_calls, &e.align_wait_us}) {
    fn(v);
  }
}

}  // namespace

ClusterStats ClusterImpl::Stats() const {
  ClusterStats s;
  if (shard_ != nullptr) s.store = shard_->Stats();
  ClusterExchangeStats& e = s.exchange;
  e.pull_calls = counters_.pull_calls.load(std::memory_order_relaxed);
  e.push_calls = counters_.push_calls.load(std::memory_order_relaxed);
  e.keys_sent = counters_.keys_sent.load(std::memory_order_relaxed);
  e.keys_served = counters_.keys_served.load(std::memory_order_relaxed);
  e.bytes_sent = counters_.bytes_sent.load(std::memory_order_relaxed);
  e.bytes_received = counters_.bytes_received.load(std::memory_order_relaxed);
  e.intents_sent = counters_.intents_sent.load(std::memory_order_relaxed);
  e.exchange_us = counters_.exchange_ns.load(std::memory_order_relaxed) / 1000;
  e.bytes_forwarded = counters_.bytes_forwarded.load(std::memory_order_relaxed);
  e.exchange_calls = counters_.exchange_calls.load(std::memory_order_relaxed);
  e.align_wait_us = counters_.align_wait_ns.load(std::memory_order_relaxed) / 1000;
  return s;
}

Result<ClusterStats> ClusterImpl::SummedStats() {
  base::MutexLock lock(&collective_mu_);
  ClusterStats s = Stats();
  std::vector<uint64_t> mine;
  ForEachCounter(s, [&](uint64_t* v) { mine.push_back(*v); });
  std::vector<uint64_t> sums(mine.size());
  STRATA_RETURN_IF_ERROR(
      comm_->AllReduceSum(mine.data(), sums.data(), static_cast<int>(mine.size())));
  size_t i = 0;
  ForEachCounter(s, [&](uint64_t* v) { *v = sums[i++]; });
  return s;
}

}  // namespace strata::cluster
