// A pipeline's use of strata::Cluster from the installed package (built when
// the package has it, strata_HAVE_CLUSTER), run under mpirun: open a cluster
// over MPI_COMM_WORLD, pull, push, pull again (every rank's gradient of a
// shared key summed once), checkpoint, close. Rank 0 prints
// "strata-consumer-cluster-ok <ranks>" when every check held on every rank.
#include <mpi.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "strata/cluster.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::string check = "ok";
  {
    strata::ClusterOptions options;
    options.store.dir = argc > 1 ? argv[1] : "/tmp/strata-consumer-cluster";
    options.store.device_rows_max = 64;
    options.store.dram_rows_max = 128;
    strata::TableOptions t;
    t.name = "ads";
    t.dim = 4;
    t.optimizer.kind = strata::Optimizer::kSgd;
    t.optimizer.learning_rate = 0.5f;
    auto cluster = strata::Cluster::Open(options, {t}, MPI_COMM_WORLD);
    if (!cluster.ok()) {
      check = "Cluster::Open: " + cluster.status().ToString();
    } else {
      strata::Cluster& c = **cluster;
      auto w = c.RegisterWorker();
      const std::vector<strata::Key> keys = {7, 11, 1000003ull + static_cast<unsigned>(rank)};
      std::vector<float> before(keys.size() * 4), after(keys.size() * 4);
      const std::vector<float> grads(keys.size() * 4, 1.0f);
      strata::Status s = w.ok() ? c.Pull(*w, 0, keys, before.data()) : w.status();
      if (s.ok()) s = c.Push(*w, 0, keys, grads.data());
      if (s.ok()) s = c.Pull(*w, 0, keys, after.data());
      if (s.ok()) s = c.AdvanceClock(*w);
      if (s.ok()) s = c.Checkpoint();
      if (s.ok()) s = c.Close();
      if (!s.ok()) check = s.ToString();
      // Keys 7 and 11 get a gradient of 1 from every rank: SGD at 0.5 moves
      // them by 0.5 per rank; this rank's own key by 0.5.
      for (size_t i = 0; s.ok() && i < after.size(); ++i) {
        const float step = i / 4 < 2 ? 0.5f * static_cast<float>(ranks) : 0.5f;
        if (std::fabs(after[i] - (before[i] - step)) > 1e-5f) check = "SGD step across ranks";
      }
    }
  }
  int bad = check == "ok" ? 0 : 1;
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad) std::fprintf(stderr, "consumer_cluster rank %d: %s\n", rank, check.c_str());
  if (rank == 0 && !any_bad) std::printf("strata-consumer-cluster-ok %d\n", ranks);
  MPI_Finalize();
  return any_bad;
}
