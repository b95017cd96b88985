// The Cluster's exchange against plain MPI calls of the same bytes, under
// mpirun (bench/cluster_bench.cc; docs/cluster.md, "Measured"): run by
// build/bin/strata_cluster_bench and by `strata bench cluster`, the same
// flags and the same report. This header needs no MPI (the CLI registers
// the command either way); RunClusterBench exists where MPI was found.
//
// Thread safety: one caller per process.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "cli/cli_util.h"
#include "engine/limits.h"
#include "strata/options.h"

namespace strata::bench {

struct ClusterBenchArgs {
  std::string dir;  // the Clusters' directory (DIR/cluster, DIR/aligned)
  uint64_t batches = 200;
  uint64_t keys = 4096;  // per rank per batch, uniform
  uint32_t dim = 16;
  uint64_t key_space = 1 << 20;
  uint32_t rounds = 7;  // one rank: alternating Store and Cluster rounds
  // ClusterOptions::collective_timeout_ms; kDefaultTimeout: the option's default.
  static constexpr uint64_t kDefaultTimeout = UINT64_MAX;
  uint64_t timeout_ms = kDefaultTimeout;
  bool json = false;
};

// The bench's flags, into *a (numbers through cli/cli_util.h: decimal,
// within range, a usage error otherwise).
inline void AddClusterBenchFlags(CLI::App* app, ClusterBenchArgs* a) {
  app->add_option("--dir", a->dir, "the clusters' directory (must be empty or missing)")
      ->required();
  cli::AddUnsigned<uint64_t>(app, "--batches", a->batches,
                             "measured batches (after as many to warm up)", 1, uint64_t{1} << 30);
  cli::AddUnsigned<uint64_t>(app, "--keys", a->keys, "keys per rank per batch", 1,
                             engine::kBatchKeysMax);
  cli::AddUnsigned<uint32_t>(app, "--dim", a->dim, "embedding floats per row", 1, kTableDimMax);
  cli::AddUnsigned<uint64_t>(app, "--key-space", a->key_space,
                             "keys drawn uniformly from [0, this) (T0 holds twice as many rows)", 1,
                             kTierRowsMax / 2);
  cli::AddUnsigned<uint32_t>(app, "--rounds", a->rounds,
                             "one rank: alternating Store and Cluster rounds", 1, 1000);
  cli::AddUnsigned<uint64_t>(app, "--collective-timeout-ms", a->timeout_ms,
                             "the Clusters' ClusterOptions::collective_timeout_ms (0: MPI_Wait, "
                             "no polling; default: the option's default)",
                             0, uint64_t{1} << 40);
  app->add_flag("--json", a->json, "one JSON line instead of a table");
}

// Collective over MPI_COMM_WORLD (MPI initialized, every rank the same
// args): runs the benchmark, rank 0 prints the report. An error on any rank
// ends the job (MPI_Abort) naming the rank. Returns the exit code.
int RunClusterBench(const ClusterBenchArgs& a);

}  // namespace strata::bench
