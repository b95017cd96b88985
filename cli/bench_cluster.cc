// `strata bench cluster`: under mpirun, the Cluster's exchange against plain
// MPI calls of the same bytes (bench/cluster_bench.h; docs/cluster.md,
// "Measured"), the same benchmark and report as build/bin/strata_cluster_bench.
// The command launches nothing: start the CLI under mpirun
// (`mpirun -np R strata bench cluster --dir DIR`); alone it runs one rank.
#include <memory>

#include "bench/cluster_bench.h"
#include "cli/command.h"
#include "cli/mpi_commands.h"

namespace strata::cli {
namespace {

CommandRegistrar bench_cluster{
    "bench", [](CLI::App& group) {
      auto args = std::make_shared<bench::ClusterBenchArgs>();
      CLI::App* c = group.add_subcommand(
          "cluster",
          "under mpirun: the Cluster's exchange against plain MPI_Alltoallv of the same bytes");
      bench::AddClusterBenchFlags(c, args.get());
      c->callback([args] { RunClusterBenchCommand(*args); });
    }};

}  // namespace
}  // namespace strata::cli
