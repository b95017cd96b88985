// `strata trace gen`: synthetic ads workloads (trace/generator.h).
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "strata/trace.h"
#include "trace/generator.h"
#include "trace/limits.h"

namespace strata::cli {
namespace {

struct GenArgs {
  std::string out;
  std::string preset = "criteo-kaggle";
  std::string cardinalities;
  std::string exponent = "1.1";
  std::string hotness = "1";
  double scale = 1.0;
  uint32_t batch_size = 4096;
  uint64_t batches = 100;
  uint32_t workers = 1;
  double drift = 0;
  uint64_t seed = 1;
  bool json = false;
};

Result<trace::GenOptions> BuildOptions(const GenArgs& a) {
  trace::GenOptions o;
  if (!a.cardinalities.empty()) {
    STRATA_ASSIGN_OR_RETURN(o.cardinalities, ParseUints(a.cardinalities, "--cardinalities", 1));
  } else {
    STRATA_ASSIGN_OR_RETURN(o, trace::PresetOptions(a.preset));
  }
  const size_t tables = o.cardinalities.size();
  STRATA_ASSIGN_OR_RETURN(o.exponents, ParseDoubles(a.exponent, "--exponent"));
  if (o.exponents.size() == 1) o.exponents.assign(tables, o.exponents[0]);
  if (a.hotness == "mlperf") {
    o.hotness = trace::MlperfHotness();
  } else {
    STRATA_ASSIGN_OR_RETURN(auto hot, ParseUints(a.hotness, "--hotness", 1, trace::kHotnessMax));
    o.hotness.assign(hot.begin(), hot.end());
    if (o.hotness.size() == 1) o.hotness.assign(tables, o.hotness[0]);
  }
  o.scale = a.scale;
  o.batch_size = a.batch_size;
  o.batches = a.batches;
  o.workers = a.workers;
  o.drift = a.drift;
  o.seed = a.seed;
  STRATA_RETURN_IF_ERROR(trace::ValidateGenOptions(o));
  return o;
}

void Run(const GenArgs& a) {
  // Every error of BuildOptions is one of the command line (options that do
  // not fit together: counts per table, a preset), so a usage error, code 2.
  auto options = BuildOptions(a);
  if (!options.ok()) {
    std::fprintf(stderr, "strata trace gen: %s\n", options.status().message().c_str());
    ExitCode() = 2;
    return;
  }
  auto totals = trace::Generate(*options, a.out);
  if (!totals.ok()) return ReportFailure("trace gen", totals.status());
  uint64_t key_space = 0;
  for (size_t t = 0; t < options->cardinalities.size(); ++t) {
    key_space += trace::ScaledKeySpace(*options, t);
  }
  if (a.json) {
    nlohmann::json j = {{"out", a.out},           {"tables", options->cardinalities.size()},
                        {"key_space", key_space}, {"batches", totals->batches},
                        {"keys", totals->keys},   {"workers", a.workers},
                        {"seed", a.seed}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("wrote %s: %zu tables, %llu keys in the key space, %llu batches, %llu keys\n",
                a.out.c_str(), options->cardinalities.size(),
                static_cast<unsigned long long>(key_space),
                static_cast<unsigned long long>(totals->batches),
                static_cast<unsigned long long>(totals->keys));
  }
}

CommandRegistrar reg{
    "trace", [](CLI::App& group) {
      auto args = std::make_shared<GenArgs>();
      auto* c = group.add_subcommand("gen", "generate a synthetic ads workload (Zipf per table)");
      c->add_option("--out", args->out, "trace file to write")->required();
      c->add_option("--preset", args->preset, "table sizes: criteo-kaggle or criteo-1tb")
          ->capture_default_str();
      AddUnsignedList(c, "--cardinalities", args->cardinalities,
                      "key space per table, comma-separated (instead of a preset)", 1,
                      static_cast<uint64_t>(trace::kGenKeySpaceMax));
      AddRealList(c, "--exponent", args->exponent,
                  "Zipf exponent: one, or one per table (0: uniform)",
                  {.min = 0, .max = trace::kGenExponentMax})
          ->capture_default_str();
      c->add_option("--hotness", args->hotness,
                    "ids per sample per table: one, one per table, or 'mlperf'")
          ->capture_default_str()
          ->transform(CLI::Validator(
              [](std::string& value) {
                return value == "mlperf" ? std::string()
                                         : CheckUnsignedList(value, 1, trace::kHotnessMax);
              },
              "list in [1, " + std::to_string(trace::kHotnessMax) + "] or mlperf"));
      AddReal(c, "--scale", args->scale, "multiplies every key space",
              {.min = 0, .max = 1e6, .min_open = true})
          ->capture_default_str();
      AddUnsigned<uint32_t>(c, "--batch-size", args->batch_size, "samples per batch", 1,
                            trace::kBatchSizeMax)
          ->capture_default_str();
      AddUnsigned<uint64_t>(c, "--batches", args->batches, "batches in all", 1,
                            trace::kGenBatchesMax)
          ->capture_default_str();
      AddUnsigned<uint32_t>(c, "--workers", args->workers,
                            "workers (batch b goes to worker b % workers)", 1,
                            trace::kTraceWorkersMax)
          ->capture_default_str();
      AddReal(c, "--drift", args->drift, "ids the hot set slides per batch",
              {.min = 0, .max = 1e12, .max_open = true})
          ->capture_default_str();
      AddUnsigned(c, "--seed", args->seed, "random seed")->capture_default_str();
      c->add_flag("--json", args->json, "print JSON");
      c->callback([args] { Run(*args); });
    }};

}  // namespace
}  // namespace strata::cli
