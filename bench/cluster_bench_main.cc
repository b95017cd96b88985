// build/bin/strata_cluster_bench: bench/cluster_bench.h's benchmark as a
// program of its own, under mpirun (`strata bench cluster` runs the same).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "bench/cluster_bench.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 1;
  try {
    strata::bench::ClusterBenchArgs a;
    CLI::App app("strata_cluster_bench: the Cluster's exchange against plain MPI_Alltoallv");
    strata::bench::AddClusterBenchFlags(&app, &a);
    try {
      app.parse(argc, argv);
      rc = strata::bench::RunClusterBench(a);
    } catch (const CLI::ParseError& e) {
      rc = app.exit(e);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_cluster_bench: rank %d: %s\n", rank, e.what());
  }
  MPI_Finalize();
  return rc;
}
