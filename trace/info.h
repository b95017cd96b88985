// Summary statistics of a trace for `strata trace info`: sizes, distinct
// keys, and per table how skewed its accesses are.
//
// Thread safety: a function of one file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/status.h"
#include "strata/trace.h"

namespace strata::trace {

struct TableInfo {
  std::string name;
  uint64_t key_space = 0;  // from the header (0: unknown)
  uint64_t keys = 0;       // accesses, duplicates included
  uint64_t unique_keys = 0;
  double top1_share = 0;       // fraction of accesses to the 1% most used keys (at least 1 key)
  uint64_t max_key_count = 0;  // accesses to the most used key
};

struct TraceInfo {
  uint32_t version = 0;
  uint32_t worker_count = 0;
  uint64_t batches = 0;
  uint64_t keys = 0;
  uint64_t unique_keys = 0;     // distinct (table, key) pairs
  uint64_t batch_rows_max = 0;  // most distinct (table, key) pairs in one batch
  double batch_rows_mean = 0;
  std::vector<TableInfo> tables;
};

Result<TraceInfo> ComputeTraceInfo(const std::string& path);

}  // namespace strata::trace
