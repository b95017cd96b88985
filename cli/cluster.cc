// `strata cluster reshard` (offline, no MPI: cluster/reshard.h) and `strata
// cluster export` (under mpirun: every row of a cluster directory to a file).
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/mpi_commands.h"
#include "cluster/manifest.h"
#include "cluster/reshard.h"

namespace strata::cli {
namespace {

struct ReshardArgs {
  std::string from;
  std::string out;
  uint32_t ranks = 0;
  bool json = false;
};

void RunReshard(const ReshardArgs& a) {
  Result<cluster::ReshardReport> r = cluster::Reshard(a.from, a.ranks, a.out);
  if (!r.ok()) return ReportFailure("cluster reshard", r.status());
  if (a.json) {
    const nlohmann::json j = {{"from", a.from},
                              {"out", a.out},
                              {"from_ranks", r->from_ranks},
                              {"to_ranks", r->to_ranks},
                              {"generation", r->generation},
                              {"rows", r->rows},
                              {"rows_per_rank", r->rows_per_rank}};
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("resharded %s (%u ranks) into %s (%u ranks) at generation %llu: %llu rows\n",
              a.from.c_str(), r->from_ranks, a.out.c_str(), r->to_ranks,
              static_cast<unsigned long long>(r->generation),
              static_cast<unsigned long long>(r->rows));
  for (size_t q = 0; q < r->rows_per_rank.size(); ++q) {
    std::printf("  rank %zu: %llu rows\n", q, static_cast<unsigned long long>(r->rows_per_rank[q]));
  }
}

CommandRegistrar reshard{
    "cluster", [](CLI::App& group) {
      auto args = std::make_shared<ReshardArgs>();
      auto* c = group.add_subcommand(
          "reshard", "rewrite a checkpointed cluster directory for another number of ranks");
      c->add_option("--from", args->from, "the cluster's directory (read)")->required();
      AddUnsigned<uint32_t>(c, "--ranks", args->ranks, "ranks of the new cluster", 1,
                            cluster::kWorldSizeMax)
          ->required();
      c->add_option("--out", args->out, "the new cluster's directory (missing or empty)")
          ->required();
      c->add_flag("--json", args->json, "print JSON");
      c->callback([args] { RunReshard(*args); });
    }};

CommandRegistrar export_rows{
    "cluster", [](CLI::App& group) {
      auto dir = std::make_shared<std::string>();
      auto out = std::make_shared<std::string>();
      auto* c = group.add_subcommand(
          "export", "under mpirun (as many ranks as the cluster has): every row to a text file");
      c->add_option("--dir", *dir, "the cluster's directory")->required();
      c->add_option("--out", *out, "the file to write (rows sorted by table and key)")->required();
      c->callback([dir, out] { RunClusterExportCommand(*dir, *out); });
    }};

}  // namespace
}  // namespace strata::cli
