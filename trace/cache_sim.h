// Offline cache simulation of a trace: how many rows a cache of `cache_rows`
// rows must fetch under three eviction policies, the yardsticks replay
// results are compared against.
//
// The trace is read as one sequence of batches in file order (all workers
// interleaved as written). Each batch is deduplicated into its set of
// distinct (table, key) rows, all of which must be resident together while
// the batch runs; a batch's missing rows are fetched (one miss each) and, to
// make room, rows outside the batch are evicted:
//   MIN      the row whose next use is farthest (Belady; the whole future
//            known): the fewest misses any cache of that size can have.
//   LRU      the least recently used row.
//   horizon  what a store whose intents reach `lookahead` batches ahead can
//            do: rows with no use within the next `lookahead` batches go
//            first, in the fallback order (LRU, or LFU: fewest uses so far,
//            then least recent); then the declared rows, farthest next use
//            first. lookahead 0 is LRU (or LFU); an unbounded one is MIN.
// Ties break by the row's first appearance in the trace.
//
// Thread safety: IndexedTrace is immutable once loaded; Simulate may run
// concurrently on one IndexedTrace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/status.h"
#include "trace/key_index.h"

namespace strata::trace {

enum class FallbackOrder : uint8_t { kLru, kLfu };

inline constexpr uint64_t kLookaheadUnbounded = UINT64_MAX;

// The deduplicated access sequence with each access's next use.
struct IndexedTrace {
  static constexpr uint32_t kNever = UINT32_MAX;

  KeyIndex index;                     // (table, key) -> row id
  std::vector<uint64_t> batch_begin;  // batches + 1 offsets into rows
  std::vector<uint32_t> rows;         // row ids, each batch's distinct rows
  std::vector<uint32_t> next_use;     // per access: next batch using the row, or kNever
  uint64_t raw_keys = 0;              // keys before deduplication
  uint64_t max_batch_rows = 0;        // most distinct rows of one batch

  uint64_t batches() const { return batch_begin.size() - 1; }
};

// Reads the trace at `path` into an IndexedTrace (memory: 8 bytes per
// distinct row of each batch plus the row index).
Result<IndexedTrace> LoadIndexedTrace(const std::string& path);

// Misses of the horizon policy (see above) with a cache of `cache_rows`.
// InvalidArgument when a batch has more distinct rows than the cache holds.
Result<uint64_t> SimulateMisses(const IndexedTrace& trace, uint64_t cache_rows, uint64_t lookahead,
                                FallbackOrder fallback);

struct OptReport {
  uint64_t batches = 0;
  uint64_t accesses = 0;     // distinct rows per batch, summed
  uint64_t unique_rows = 0;  // compulsory misses of any policy
  uint64_t max_batch_rows = 0;
  uint64_t cache_rows = 0;
  uint64_t lookahead = 0;
  FallbackOrder fallback = FallbackOrder::kLru;
  uint64_t opt_misses = 0;
  uint64_t lru_misses = 0;
  uint64_t horizon_misses = 0;
};

Result<OptReport> RunOpt(const IndexedTrace& trace, uint64_t cache_rows, uint64_t lookahead,
                         FallbackOrder fallback);

}  // namespace strata::trace
