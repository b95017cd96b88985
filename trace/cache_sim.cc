// Offline cache simulation: MIN, LRU and the lookahead-limited horizon
// policy as one algorithm (cache_sim.h).
//
// Three lazy heaps hold the cached rows: `undeclared` (fallback order, the
// first to go), `declared` (next use known within the lookahead; farthest
// first) and `promote` (when an undeclared row's next use comes into the
// lookahead). A row's `version` changes whenever its state does, so stale
// heap entries are recognised and dropped when popped.
#include "trace/cache_sim.h"

#include <algorithm>
#include <queue>

#include "base/assert.h"
#include "strata/trace.h"

namespace strata::trace {
namespace {

struct Entry {
  uint64_t priority;
  uint32_t row;
  uint32_t version;
};
struct Greater {
  bool operator()(const Entry& a, const Entry& b) const {
    return a.priority != b.priority ? a.priority > b.priority : a.row > b.row;
  }
};
struct Less {
  bool operator()(const Entry& a, const Entry& b) const {
    return a.priority != b.priority ? a.priority < b.priority : a.row > b.row;
  }
};
using MinHeap = std::priority_queue<Entry, std::vector<Entry>, Greater>;
using MaxHeap = std::priority_queue<Entry, std::vector<Entry>, Less>;

struct RowState {
  uint32_t version = 0;
  uint32_t last_use = 0;
  uint32_t uses = 0;
  uint32_t next_use = IndexedTrace::kNever;
  uint32_t pinned = 0;  // batch + 1 while the row is in the current batch
  bool cached = false;
  bool declared = false;
};

}  // namespace

Result<IndexedTrace> LoadIndexedTrace(const std::string& path) {
  IndexedTrace t;
  t.batch_begin.push_back(0);
  std::vector<uint32_t> seen_in;  // row -> batch + 1 of its last appearance
  STRATA_RETURN_IF_ERROR(ForEachBatch(path, [&](const TraceBatch& batch) -> Status {
    const uint32_t stamp = static_cast<uint32_t>(t.batches() + 1);
    if (t.batches() + 1 >= IndexedTrace::kNever) {
      return Status::InvalidArgument("trace " + path + ": too many batches to simulate");
    }
    for (const auto& table : batch.tables) {
      t.raw_keys += table.keys.size();
      for (Key k : table.keys) {
        bool inserted = false;
        const uint32_t row = t.index.Insert(table.table, k, &inserted);
        if (inserted) seen_in.push_back(0);
        if (seen_in[row] == stamp) continue;
        seen_in[row] = stamp;
        t.rows.push_back(row);
      }
    }
    t.max_batch_rows = std::max<uint64_t>(t.max_batch_rows, t.rows.size() - t.batch_begin.back());
    t.batch_begin.push_back(t.rows.size());
    return Status::Ok();
  }));
  // Next uses, scanning backwards.
  std::vector<uint32_t> next(t.index.size(), IndexedTrace::kNever);
  t.next_use.resize(t.rows.size());
  for (uint64_t b = t.batches(); b-- > 0;) {
    for (uint64_t p = t.batch_begin[b]; p < t.batch_begin[b + 1]; ++p) {
      t.next_use[p] = next[t.rows[p]];
      next[t.rows[p]] = static_cast<uint32_t>(b);
    }
  }
  return t;
}

Result<uint64_t> SimulateMisses(const IndexedTrace& trace, uint64_t cache_rows, uint64_t lookahead,
                                FallbackOrder fallback) {
  if (trace.max_batch_rows > cache_rows) {
    return Status::InvalidArgument(
        "--cache-rows " + std::to_string(cache_rows) + ": a batch of the trace has " +
        std::to_string(trace.max_batch_rows) + " distinct rows, all of which must fit together");
  }
  std::vector<RowState> rows(trace.index.size());
  MinHeap undeclared;
  MaxHeap declared;
  MinHeap promote;
  uint64_t cached = 0;
  uint64_t misses = 0;

  auto fallback_priority = [&](const RowState& r) -> uint64_t {
    if (fallback == FallbackOrder::kLfu) return (uint64_t{r.uses} << 32) | r.last_use;
    return r.last_use;
  };
  // Evicts one row not pinned by batch b: undeclared first, then declared.
  auto evict_one = [&](uint32_t b) {
    while (!undeclared.empty()) {
      const Entry e = undeclared.top();
      undeclared.pop();
      RowState& r = rows[e.row];
      if (e.version != r.version || !r.cached || r.declared || r.pinned == b + 1) continue;
      r.cached = false;
      r.version++;
      return;
    }
    while (!declared.empty()) {
      const Entry e = declared.top();
      declared.pop();
      RowState& r = rows[e.row];
      if (e.version != r.version || !r.cached || !r.declared || r.pinned == b + 1) continue;
      r.cached = false;
      r.version++;
      return;
    }
    STRATA_ASSERT(false, "SimulateMisses: nothing to evict");
  };

  for (uint32_t b = 0; b < trace.batches(); ++b) {
    // Rows whose next use has come within the lookahead become declared.
    while (!promote.empty() && promote.top().priority <= b) {
      const Entry e = promote.top();
      promote.pop();
      RowState& r = rows[e.row];
      if (e.version != r.version || !r.cached || r.declared) continue;
      r.declared = true;
      declared.push({r.next_use, e.row, r.version});
    }
    const uint64_t begin = trace.batch_begin[b];
    const uint64_t end = trace.batch_begin[b + 1];
    uint64_t batch_misses = 0;
    for (uint64_t p = begin; p < end; ++p) {
      RowState& r = rows[trace.rows[p]];
      r.pinned = b + 1;
      if (!r.cached) batch_misses++;
    }
    misses += batch_misses;
    while (cached + batch_misses > cache_rows) {
      evict_one(b);
      cached--;
    }
    for (uint64_t p = begin; p < end; ++p) {
      const uint32_t id = trace.rows[p];
      RowState& r = rows[id];
      if (!r.cached) {
        r.cached = true;
        cached++;
      }
      r.last_use = b;
      r.uses++;
      r.next_use = trace.next_use[p];
      r.version++;
      const bool known = r.next_use != IndexedTrace::kNever && r.next_use - b <= lookahead;
      r.declared = known;
      if (known) {
        declared.push({r.next_use, id, r.version});
      } else {
        undeclared.push({fallback_priority(r), id, r.version});
        if (r.next_use != IndexedTrace::kNever) {
          promote.push({r.next_use - lookahead, id, r.version});
        }
      }
    }
  }
  return misses;
}

Result<OptReport> RunOpt(const IndexedTrace& trace, uint64_t cache_rows, uint64_t lookahead,
                         FallbackOrder fallback) {
  OptReport report;
  report.batches = trace.batches();
  report.accesses = trace.rows.size();
  report.unique_rows = trace.index.size();
  report.max_batch_rows = trace.max_batch_rows;
  report.cache_rows = cache_rows;
  report.lookahead = lookahead;
  report.fallback = fallback;
  STRATA_ASSIGN_OR_RETURN(report.opt_misses,
                          SimulateMisses(trace, cache_rows, kLookaheadUnbounded, fallback));
  STRATA_ASSIGN_OR_RETURN(report.lru_misses,
                          SimulateMisses(trace, cache_rows, 0, FallbackOrder::kLru));
  STRATA_ASSIGN_OR_RETURN(report.horizon_misses,
                          SimulateMisses(trace, cache_rows, lookahead, fallback));
  return report;
}

}  // namespace strata::trace
