// The tiering sweep behind `strata bench sweep`: a grid of replays (tier
// sizes x lookahead x fallback policy x SSD backend x compute time x
// workload), each beside
// the cache simulator's floors for the same cache size and lookahead, written
// as CSV and JSON for the plot script (scripts/plot_sweep.py).
//
// Config (JSON):
//   {
//     "workloads": [ {"name": "kaggle", "preset": "criteo-kaggle", "scale": 0.01,
//                     "batch_size": 1024, "batches": 200, "exponent": 1.1,
//                     "seed": 1, "workers": 1, "drift": 0}      // generated
//                  | {"name": "sample", "trace": "path/to.trace"} ],  // given
//     "device_rows": [20000], "dram_rows": [40000],
//     "lookahead": [0, 2, 32, 256],       // 0: --no-intents
//     "fallback": ["lru", "lfu"], "ssd_backend": ["native"],
//     "compute_us": [0, 20000],           // simulated compute per batch
//     "workers": 1, "dim": 16, "device_share_growth": 0.25, "dram_shards": 0
//   }
// Unknown keys are errors, so a typo does not silently sweep the defaults;
// so are a negative or fractional count and values past `strata replay`'s
// bounds (tier rows, lookahead, compute_us).
//
// Thread safety: RunSweep runs one replay at a time from the calling thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/replay_driver.h"
#include "strata/status.h"

namespace strata::bench {

struct SweepRow {
  std::string workload;
  uint64_t device_rows = 0;
  uint64_t dram_rows = 0;
  uint64_t lookahead = 0;  // 0: no intents
  std::string fallback;
  std::string ssd_backend;
  uint64_t compute_us = 0;
  ReplayReport replay;
  uint64_t compulsory_misses = 0;  // unique rows of the trace
  uint64_t opt_misses = 0;
  uint64_t lru_misses = 0;
  uint64_t horizon_misses = 0;  // for this lookahead and fallback
};

// Parses the config text; InvalidArgument naming the key at fault.
struct SweepConfig;
Result<SweepConfig> ParseSweepConfig(const std::string& json_text);

struct SweepWorkload {
  std::string name;
  std::string trace;  // given, or generated into the output directory
  std::string preset = "criteo-kaggle";
  double scale = 0.01;
  uint32_t batch_size = 1024;
  uint64_t batches = 200;
  double exponent = 1.1;
  uint64_t seed = 1;
  uint32_t workers = 1;
  double drift = 0;
};

struct SweepConfig {
  std::vector<SweepWorkload> workloads;
  std::vector<uint64_t> device_rows;
  std::vector<uint64_t> dram_rows;
  std::vector<uint64_t> lookahead;
  std::vector<std::string> fallback = {"lru"};
  std::vector<std::string> ssd_backend = {"native"};
  std::vector<uint64_t> compute_us = {0};
  uint32_t workers = 1;
  uint32_t dim = 16;
  double device_share_growth = 0.25;
  uint32_t dram_shards = 0;  // T1 shards of every run (0: automatic)
};

// Runs the grid in `out_dir` (created), writing sweep.csv and sweep.json;
// `log` (may be empty) gets one line per finished replay.
Result<std::vector<SweepRow>> RunSweep(const SweepConfig& config, const std::string& out_dir,
                                       const StoreOpener& open,
                                       const std::function<void(const SweepRow&)>& log);

}  // namespace strata::bench
