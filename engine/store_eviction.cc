// The eviction order: which rows leave T0 and T1 first, and which tables
// give up T0 room.
//
// A row's next_use is the start of its nearest intent window, or without one
// a fallback value above every real clock (LRU, or LFU with LRU among equal
// counts), so T0's "largest next_use first" is Belady on the known future
// and the fallback policy elsewhere; T1 receives the same values. Across
// tables, RebalanceT0 lends T0 quota from tables evicting colder rows to
// tables evicting hotter ones.
#include <algorithm>

#include "engine/store_impl.h"

namespace strata::engine {
namespace {

// The sketch's key for a row: the table id folded in, so one sketch serves
// every table (a bijection, so two rows of one table never share a key).
Key SketchKey(TableId table, Key key) { return key ^ (uint64_t{table} * 0x9e3779b97f4a7c15ull); }

}  // namespace

// The fallback order of a row without intent, above every real clock: LRU
// (older access seq = larger value = evicted first), or, with a frequency
// sketch, least frequent first and LRU among equal counts.
int64_t StoreImpl::FallbackValue(uint64_t freq, uint64_t seq) const {
  uint64_t score = seq & kFallbackSeqMask;
  score |= std::min(freq, kFallbackFreqMax) << kFallbackFreqShift;
  return kFallbackBase + (kFallbackSpan - 1 - static_cast<int64_t>(score));
}

Status StoreImpl::NextUses(Table& table, std::span<const Key> keys,
                           std::vector<int64_t>* next_use) {
  const uint64_t seq = fallback_.access_seq.fetch_add(1, std::memory_order_relaxed) + 1;
  next_use->resize(keys.size());
  if (fallback_.sketch) {
    base::MutexLock lock(&fallback_.mu);
    for (size_t i = 0; i < keys.size(); ++i) {
      (*next_use)[i] = FallbackValue(fallback_.sketch->Estimate(SketchKey(table.id, keys[i])), seq);
    }
  } else {
    for (size_t i = 0; i < keys.size(); ++i) (*next_use)[i] = FallbackValue(0, seq);
  }
  if (tracked_keys_.load(std::memory_order_acquire) == 0) return Status::Ok();
  base::MutexLock lock(&intent_mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    Clock c = intents_.NextUse(table.id, keys[i]);
    if (c != kClockNever) (*next_use)[i] = c;
  }
  return Status::Ok();
}

void StoreImpl::CountAccess(Table& table, std::span<const Key> keys) {
  if (!fallback_.sketch) return;
  std::vector<Key>& mixed = table.sketch_keys;
  mixed.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) mixed[i] = SketchKey(table.id, keys[i]);
  base::MutexLock lock(&fallback_.mu);
  fallback_.sketch->Add(mixed);
}

// Gives `keys` their current next use (intent or fallback) in T0 and, with
// `with_t1`, in T1 (rows absent from a tier are skipped there). T1 is left
// out on the Pull path: its order is set again when a row is demoted.
Status StoreImpl::RefreshNextUse(Table& table, std::span<const Key> keys, bool with_t1) {
  std::vector<int64_t> next_use;
  for (size_t off = 0; off < keys.size(); off += kChunkKeysMax) {
    std::span<const Key> chunk =
        keys.subspan(off, std::min<size_t>(kChunkKeysMax, keys.size() - off));
    STRATA_RETURN_IF_ERROR(NextUses(table, chunk, &next_use));
    STRATA_RETURN_IF_ERROR(table.t0->SetNextUse(chunk, next_use));
    if (with_t1) STRATA_RETURN_IF_ERROR(dram_->SetNextUse(table.id, chunk, next_use));
  }
  return Status::Ok();
}

// Lends T0 quota between tables once per clock advance: tables are ranked
// by their eviction frontier (the nearest next use among the rows they had
// to evict last); the hottest gains a step from the coldest, the second
// hottest from the second coldest, and so on while the taker's frontier is
// hotter than the giver's. A table that did not evict and has unused room
// gives first. The static split by weight is where every table starts; this
// moves T0 toward one Belady order across tables (T1 has one already).
void StoreImpl::RebalanceT0() {
  if (tables_.size() < 2 || options_.device_share_growth_max <= 0) return;
  uint64_t clocks = 0;
  const uint32_t n = workers_.count.load(std::memory_order_acquire);
  for (uint32_t w = 0; w < n; ++w)
    clocks += workers_.slots[w]->clock.load(std::memory_order_acquire);
  if (clocks == planner_.rebalanced_at_clocks) return;
  planner_.rebalanced_at_clocks = clocks;
  struct Rank {
    int64_t frontier;
    Table* table;
  };
  std::vector<Rank> ranks;
  for (auto& t : tables_) {
    int64_t f = t->evict_frontier.load(std::memory_order_relaxed);
    if (f == kNoFrontier) {
      // Not evicting: a giver only if it leaves room unused. Its size needs
      // its lock (one table lock at a time; a busy table is skipped).
      if (!t->mu.TryLock()) continue;
      const bool full = t->t0->Size() + t->t0_share / kT0LimitFloorDivisor >= t->t0_limit.load();
      t->mu.Unlock();
      if (full) continue;
    }
    ranks.push_back({f, t.get()});
  }
  std::sort(ranks.begin(), ranks.end(),
            [](const Rank& a, const Rank& b) { return a.frontier < b.frontier; });
  const uint64_t step = std::max<uint64_t>(1, options_.device_rows_max / kT0QuotaStepDivisor);
  size_t lo = 0, hi = ranks.size();
  while (lo + 1 < hi && ranks[lo].frontier < ranks[hi - 1].frontier) {
    Table& taker = *ranks[lo].table;
    Table& giver = *ranks[hi - 1].table;
    const uint64_t giver_limit = giver.t0_limit.load(std::memory_order_relaxed);
    const uint64_t taker_limit = taker.t0_limit.load(std::memory_order_relaxed);
    // A giver keeps a floor and room for its pins (pin cap of the new limit).
    const uint64_t floor = std::max<uint64_t>(
        {giver.t0_share / kT0LimitFloorDivisor, kTableT0RowsMin,
         static_cast<uint64_t>(double(giver.intent_pinned.load()) / kPinFractionMax) + 1});
    const uint64_t give = giver_limit > floor ? giver_limit - floor : 0;
    const uint64_t take = taker.t0_rows_cap > taker_limit ? taker.t0_rows_cap - taker_limit : 0;
    const uint64_t moved = std::min({step, give, take});
    if (give == 0) {
      --hi;
      continue;
    }
    if (take == 0) {
      ++lo;
      continue;
    }
    giver.t0_limit.store(giver_limit - moved, std::memory_order_relaxed);
    taker.t0_limit.store(taker_limit + moved, std::memory_order_relaxed);
    giver.evict_frontier.store(kNoFrontier, std::memory_order_relaxed);
    taker.evict_frontier.store(kNoFrontier, std::memory_order_relaxed);
    ++lo;
    --hi;
  }
}

}  // namespace strata::engine
