// The eviction order: which rows leave T0 and T1 first, across tables.
//
// A row's next_use is the start of its nearest intent window, or without one
// a fallback value above every real clock (LRU, or LFU with LRU among equal
// counts), so T0's "largest next_use first" is Belady on the known future
// and the fallback policy elsewhere; T1 receives the same values. Across
// tables, MakeT0Room picks T0's victims among every table's rows.
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

uint64_t StoreImpl::T0Rows() const {
  uint64_t rows = 0;
  for (const auto& t : tables_) rows += t->t0_rows.load(std::memory_order_relaxed);
  return rows;
}

uint64_t StoreImpl::T0IntentPins() const {
  uint64_t pins = 0;
  for (const auto& t : tables_) pins += t->intent_pinned.load(std::memory_order_relaxed);
  return pins;
}

// One victim order across the tables' T0: each candidate table names the
// `count` largest next uses among its unpinned rows; the `count` largest of
// all those are the victims, and each table evicts its part of them. Tables
// other than `table` are locked with TryLock (never a wait while holding a
// table lock); one busy elsewhere keeps its rows this time, so its rows may
// outlive a slightly better row of another table until the next eviction.
// Thread-safety analysis cannot follow locks taken in a loop by TryLock;
// every access below is to `table` (held by the caller) or to a table
// whose TryLock succeeded.
Status StoreImpl::MakeT0Room(Table& table, uint64_t count) {
  if (count == 0) return Status::Ok();
  std::vector<Table*> held = {&table};
  for (auto& t : tables_) {
    if (t.get() == &table || t->t0_rows.load(std::memory_order_relaxed) == 0) continue;
    if (t->mu.TryLock()) held.push_back(t.get());
  }
  struct Candidate {
    int64_t next_use;
    uint32_t part;
  };
  std::vector<Candidate> candidates;
  std::vector<int64_t> top;
  Status status;
  for (uint32_t p = 0; p < held.size() && status.ok(); ++p) {
    status = held[p]->t0->LargestNextUses(count, &top);
    for (int64_t v : top) candidates.push_back({v, p});
  }
  std::vector<uint64_t> take(held.size(), 0);
  if (status.ok()) {
    const uint64_t n = std::min<uint64_t>(count, candidates.size());
    std::nth_element(
        candidates.begin(), candidates.begin() + (n == 0 ? 0 : n - 1), candidates.end(),
        [](const Candidate& a, const Candidate& b) { return a.next_use > b.next_use; });
    for (uint64_t i = 0; i < n; ++i) ++take[candidates[i].part];
  }
  for (uint32_t p = 0; p < held.size() && status.ok(); ++p) {
    status = EvictFromT0(*held[p], take[p]);
  }
  for (uint32_t p = 1; p < held.size(); ++p) held[p]->mu.Unlock();
  return status;
}

}  // namespace strata::engine
