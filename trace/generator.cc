// Synthetic workload generator (generator.h).
#include "trace/generator.h"

#include <cmath>

#include "trace/limits.h"
#include "trace/zipf.h"

namespace strata::trace {
namespace {

const std::vector<uint64_t> kCriteoKaggle = {
    1460, 583,   10131227, 2202608, 305,  24,   12517, 633,     3,  93145, 5683,   8351593, 3194,
    27,   14992, 5461306,  10,      5652, 2173, 4,     7046547, 18, 15,    286181, 105,     142572};
const std::vector<uint64_t> kCriteo1Tb = {
    39884406, 39043,    17289,    7420,     20263,  3,     7120, 1543, 63,
    38532951, 2953546,  403346,   10,       2208,   11938, 155,  4,    976,
    14,       39979771, 25641295, 39664984, 585935, 12972, 108,  36};
const std::vector<uint32_t> kMlperfHotness = {3, 2, 1, 2, 6, 1, 1,  1,   1,  7,  3, 8, 1,
                                              6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1};

}  // namespace

std::vector<uint32_t> MlperfHotness() { return kMlperfHotness; }

Result<GenOptions> PresetOptions(const std::string& preset, double exponent) {
  GenOptions o;
  if (preset == "criteo-kaggle") {
    o.cardinalities = kCriteoKaggle;
  } else if (preset == "criteo-1tb") {
    o.cardinalities = kCriteo1Tb;
  } else {
    return Status::InvalidArgument("unknown preset '" + preset +
                                   "' (known: criteo-kaggle, criteo-1tb)");
  }
  o.exponents.assign(o.cardinalities.size(), exponent);
  o.hotness.assign(o.cardinalities.size(), 1);
  return o;
}

uint64_t ScaledKeySpace(const GenOptions& options, size_t table) {
  const double n = std::round(static_cast<double>(options.cardinalities[table]) * options.scale);
  return n < 1 ? 1 : static_cast<uint64_t>(n);
}

Status ValidateGenOptions(const GenOptions& o) {
  const size_t tables = o.cardinalities.size();
  if (tables == 0 || tables > kTraceTablesMax) {
    return Status::InvalidArgument("--cardinalities: need 1 to " + std::to_string(kTraceTablesMax) +
                                   " tables");
  }
  if (o.exponents.size() != tables) {
    return Status::InvalidArgument("--exponent: give one value or one per table (" +
                                   std::to_string(tables) + "), got " +
                                   std::to_string(o.exponents.size()));
  }
  if (o.hotness.size() != tables) {
    return Status::InvalidArgument("--hotness: give one value or one per table (" +
                                   std::to_string(tables) + "), got " +
                                   std::to_string(o.hotness.size()));
  }
  if (!(o.scale > 0 && o.scale <= 1e6))
    return Status::InvalidArgument("--scale must be in (0, 1e6]");
  for (size_t t = 0; t < tables; ++t) {
    if (o.cardinalities[t] == 0) {
      return Status::InvalidArgument("--cardinalities: table " + std::to_string(t) + " is empty");
    }
    // Checked before ScaledKeySpace casts the scaled size to an integer.
    if (!(static_cast<double>(o.cardinalities[t]) * o.scale <= kGenKeySpaceMax)) {
      return Status::InvalidArgument("--cardinalities times --scale: table " + std::to_string(t) +
                                     " has more than 2^62 keys");
    }
    if (!(o.exponents[t] >= 0 && o.exponents[t] <= kGenExponentMax)) {
      return Status::InvalidArgument("--exponent of table " + std::to_string(t) +
                                     " must be in [0, " +
                                     std::to_string(static_cast<int>(kGenExponentMax)) + "]");
    }
    if (o.hotness[t] == 0 || o.hotness[t] > kHotnessMax) {
      return Status::InvalidArgument("--hotness of table " + std::to_string(t) +
                                     " must be in [1, " + std::to_string(kHotnessMax) + "]");
    }
  }
  if (o.batch_size == 0 || o.batch_size > kBatchSizeMax) {
    return Status::InvalidArgument("--batch-size must be in [1, " + std::to_string(kBatchSizeMax) +
                                   "]");
  }
  if (o.batches == 0 || o.batches > kGenBatchesMax) {
    return Status::InvalidArgument("--batches must be in [1, " + std::to_string(kGenBatchesMax) +
                                   "]");
  }
  if (o.workers == 0 || o.workers > kTraceWorkersMax) {
    return Status::InvalidArgument("--workers must be in [1, " + std::to_string(kTraceWorkersMax) +
                                   "]");
  }
  if (!(o.drift >= 0 && o.drift < 1e12)) return Status::InvalidArgument("--drift must be >= 0");
  return Status::Ok();
}

Result<TraceTotals> Generate(const GenOptions& o, const std::string& path) {
  STRATA_RETURN_IF_ERROR(ValidateGenOptions(o));
  const size_t tables = o.cardinalities.size();
  TraceHeader header;
  header.worker_count = o.workers;
  std::vector<ZipfSampler> samplers;
  for (size_t t = 0; t < tables; ++t) {
    header.tables.push_back({"t" + std::to_string(t), ScaledKeySpace(o, t)});
    samplers.emplace_back(ScaledKeySpace(o, t), o.exponents[t]);
  }
  STRATA_ASSIGN_OR_RETURN(auto writer, TraceWriter::Create(path, header));
  SplitMix64 rng(o.seed);
  TraceBatch batch;
  batch.tables.resize(tables);
  for (uint64_t b = 0; b < o.batches; ++b) {
    batch.worker = static_cast<WorkerId>(b % o.workers);
    batch.clock = static_cast<Clock>(b / o.workers);
    const double shift = std::floor(o.drift * static_cast<double>(b));
    for (size_t t = 0; t < tables; ++t) {
      const uint64_t n = samplers[t].n();
      const uint64_t rotation = static_cast<uint64_t>(std::fmod(shift, static_cast<double>(n)));
      const uint64_t salt = static_cast<uint64_t>(t) << 48;
      auto& entry = batch.tables[t];
      entry.table = static_cast<TableId>(t);
      entry.keys.resize(static_cast<size_t>(o.batch_size) * o.hotness[t]);
      for (auto& key : entry.keys) {
        uint64_t id = samplers[t].Sample(rng) - 1 + rotation;
        if (id >= n) id -= n;
        key = MixSplit64(id ^ salt);
      }
    }
    STRATA_RETURN_IF_ERROR(writer->Append(batch));
  }
  STRATA_RETURN_IF_ERROR(writer->Finish());
  return writer->totals();
}

}  // namespace strata::trace
