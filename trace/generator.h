// Synthetic ads workloads: batches of samples, each sample drawing
// `hotness[t]` ids per table t from a Zipf distribution over the table's key
// space. Deterministic: the same options (seed included) give the same trace,
// byte for byte.
//
// Ranks map to ids through a rotation that moves by `drift` ids per batch
// (the hot set slides over time), and ids to keys through a bijective 64-bit
// mix, so keys look hashed and never collide within a table. Batch b belongs
// to worker b % workers at clock b / workers.
//
// Thread safety: functions of values; Generate writes one trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/status.h"
#include "strata/trace.h"

namespace strata::trace {

struct GenOptions {
  std::vector<uint64_t> cardinalities;  // key space per table (before scale)
  std::vector<double> exponents;        // Zipf exponent per table (0: uniform)
  std::vector<uint32_t> hotness;        // ids per sample per table
  double scale = 1.0;                   // multiplies every key space (at least 1 key)
  uint32_t batch_size = 4096;           // samples per batch
  uint64_t batches = 100;
  uint32_t workers = 1;
  double drift = 0.0;  // ids the hot set slides per batch
  uint64_t seed = 1;
};

// The table sizes of a published dataset (/work/shared/data/README.md), one
// exponent for every table, hotness 1. Presets: "criteo-kaggle",
// "criteo-1tb". InvalidArgument naming the preset otherwise.
Result<GenOptions> PresetOptions(const std::string& preset, double exponent = 1.1);

// MLPerf DLRM v2 ids per sample for the 26 tables (multi-hot).
std::vector<uint32_t> MlperfHotness();

// Key space of table t after scaling.
uint64_t ScaledKeySpace(const GenOptions& options, size_t table);

// Checks sizes and ranges: InvalidArgument naming the option at fault.
[[nodiscard]] Status ValidateGenOptions(const GenOptions& options);

// Writes the trace to `path` (tables named "t0", "t1", ...).
Result<TraceTotals> Generate(const GenOptions& options, const std::string& path);

}  // namespace strata::trace
