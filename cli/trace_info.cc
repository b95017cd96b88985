// `strata trace info`: sizes, distinct keys and skew of a trace.
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "trace/info.h"

namespace strata::cli {
namespace {

struct InfoArgs {
  std::string trace;
  bool json = false;
};

void Run(const InfoArgs& a) {
  auto info = trace::ComputeTraceInfo(a.trace);
  if (!info.ok()) return ReportFailure("trace info", info.status());
  if (a.json) {
    nlohmann::json tables = nlohmann::json::array();
    for (const auto& t : info->tables) {
      tables.push_back({{"name", t.name},
                        {"key_space", t.key_space},
                        {"keys", t.keys},
                        {"unique_keys", t.unique_keys},
                        {"top1_share", t.top1_share},
                        {"max_key_count", t.max_key_count}});
    }
    nlohmann::json j = {{"trace", a.trace},
                        {"version", info->version},
                        {"workers", info->worker_count},
                        {"batches", info->batches},
                        {"keys", info->keys},
                        {"unique_keys", info->unique_keys},
                        {"batch_rows_max", info->batch_rows_max},
                        {"batch_rows_mean", info->batch_rows_mean},
                        {"tables", tables}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("trace %s: version %u, %u workers\n", a.trace.c_str(), info->version,
              info->worker_count);
  std::printf(
      "batches %llu  keys %llu  unique keys %llu  distinct rows per batch: mean %.1f max %llu\n",
      static_cast<unsigned long long>(info->batches), static_cast<unsigned long long>(info->keys),
      static_cast<unsigned long long>(info->unique_keys), info->batch_rows_mean,
      static_cast<unsigned long long>(info->batch_rows_max));
  std::printf("%-12s %14s %14s %14s %10s %12s\n", "table", "key_space", "keys", "unique", "top1%",
              "max_count");
  for (const auto& t : info->tables) {
    std::printf("%-12s %14llu %14llu %14llu %9.1f%% %12llu\n", t.name.c_str(),
                static_cast<unsigned long long>(t.key_space),
                static_cast<unsigned long long>(t.keys),
                static_cast<unsigned long long>(t.unique_keys), 100.0 * t.top1_share,
                static_cast<unsigned long long>(t.max_key_count));
  }
}

CommandRegistrar reg{"trace", [](CLI::App& group) {
                       auto args = std::make_shared<InfoArgs>();
                       auto* c = group.add_subcommand(
                           "info", "batches, keys, distinct keys and per-table skew");
                       c->add_option("trace", args->trace, "trace file")->required();
                       c->add_flag("--json", args->json, "print JSON");
                       c->callback([args] { Run(*args); });
                     }};

}  // namespace
}  // namespace strata::cli
