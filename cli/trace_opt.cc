// `strata trace opt`: misses of a cache of N rows under Belady's MIN, LRU
// and the lookahead-limited horizon policy (trace/cache_sim.h).
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "trace/cache_sim.h"

namespace strata::cli {
namespace {

struct OptArgs {
  std::string trace;
  uint64_t cache_rows = 0;
  uint64_t lookahead = 0;
  std::string fallback = "lru";
  bool json = false;
};

void Run(const OptArgs& a) {
  trace::FallbackOrder fallback = trace::FallbackOrder::kLru;
  if (a.fallback == "lfu") {
    fallback = trace::FallbackOrder::kLfu;
  } else if (a.fallback != "lru") {
    return ReportFailure("trace opt",
                         Status::InvalidArgument("--fallback '" + a.fallback + "' (lru, lfu)"));
  }
  auto indexed = trace::LoadIndexedTrace(a.trace);
  if (!indexed.ok()) return ReportFailure("trace opt", indexed.status());
  auto r = trace::RunOpt(*indexed, a.cache_rows, a.lookahead, fallback);
  if (!r.ok()) return ReportFailure("trace opt", r.status());
  if (a.json) {
    nlohmann::json j = {{"trace", a.trace},
                        {"cache_rows", r->cache_rows},
                        {"lookahead", r->lookahead},
                        {"fallback", a.fallback},
                        {"batches", r->batches},
                        {"accesses", r->accesses},
                        {"unique_rows", r->unique_rows},
                        {"max_batch_rows", r->max_batch_rows},
                        {"opt_misses", r->opt_misses},
                        {"lru_misses", r->lru_misses},
                        {"horizon_misses", r->horizon_misses},
                        // Misses of rows seen before: what a store reads from
                        // SSD (a first touch creates the row instead).
                        {"compulsory_misses", r->unique_rows},
                        {"opt_reads", r->opt_misses - r->unique_rows},
                        {"lru_reads", r->lru_misses - r->unique_rows},
                        {"horizon_reads", r->horizon_misses - r->unique_rows}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("trace %s: %llu batches, %llu distinct rows per batch summed, %llu unique rows\n",
              a.trace.c_str(), static_cast<unsigned long long>(r->batches),
              static_cast<unsigned long long>(r->accesses),
              static_cast<unsigned long long>(r->unique_rows));
  std::printf("cache %llu rows, lookahead %llu, fallback %s\n",
              static_cast<unsigned long long>(r->cache_rows),
              static_cast<unsigned long long>(r->lookahead), a.fallback.c_str());
  std::printf("%-16s %14s %10s %14s\n", "policy", "misses", "x MIN", "reads");
  auto row = [&](const char* name, uint64_t misses) {
    std::printf("%-16s %14llu %10.3f %14llu\n", name, static_cast<unsigned long long>(misses),
                r->opt_misses == 0 ? 1.0 : static_cast<double>(misses) / r->opt_misses,
                static_cast<unsigned long long>(misses - r->unique_rows));
  };
  row("opt (MIN)", r->opt_misses);
  row("horizon", r->horizon_misses);
  row("lru", r->lru_misses);
  std::printf("reads = misses - %llu first touches (rows created, not read)\n",
              static_cast<unsigned long long>(r->unique_rows));
}

CommandRegistrar reg{
    "trace", [](CLI::App& group) {
      auto args = std::make_shared<OptArgs>();
      auto* c =
          group.add_subcommand("opt", "misses of a cache under Belady MIN, LRU and a horizon");
      c->add_option("trace", args->trace, "trace file")->required();
      AddUnsigned(c, "--cache-rows", args->cache_rows, "rows the cache holds")->required();
      AddUnsigned(c, "--lookahead", args->lookahead, "batches the future is known ahead (horizon)")
          ->capture_default_str();
      c->add_option("--fallback", args->fallback, "order for rows with no known use: lru or lfu")
          ->capture_default_str();
      c->add_flag("--json", args->json, "print JSON");
      c->callback([args] { Run(*args); });
    }};

}  // namespace
}  // namespace strata::cli
