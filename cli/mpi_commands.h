// The commands that run under mpirun over a strata::Cluster: `strata replay
// --cluster` (bench/cluster_replay.h; rank 0 prints every rank's counters
// and their sum, text or JSON), `strata cluster export` and `strata bench
// cluster` (bench/cluster_bench.h). In a build
// without MPI each reports that it needs MPI.
#pragma once

#include <string>

#include "bench/cluster_bench.h"
#include "bench/replay_driver.h"

namespace strata::cli {

// Initializes MPI, runs the cluster replay on this rank, prints (rank 0),
// finalizes MPI. A build without MPI reports that --cluster needs it.
void RunClusterReplayCommand(const bench::ReplayOptions& options, const std::string& faults,
                             bool json);

// Opens the cluster in `dir` with the tables its manifest names and writes
// every row to `out` (bench/row_export.h); rank 0 prints the row counts.
void RunClusterExportCommand(const std::string& dir, const std::string& out);

// Initializes MPI, runs the exchange benchmark (bench/cluster_bench.h) on
// this rank, finalizes MPI; the exit code is the bench's.
void RunClusterBenchCommand(const bench::ClusterBenchArgs& args);

}  // namespace strata::cli
