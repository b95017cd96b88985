// strata_cluster_bench: the Cluster's exchange measured under mpirun
// (docs/cluster.md, "Measured"). Every rank pulls and pushes `--keys` uniform
// keys of one table per batch; the program reports, on rank 0, as a table or
// --json:
//   - the Cluster's Pull + Push time per batch, and the part of it in the
//     all-to-alls (ClusterStats::exchange.exchange_us, the slowest rank);
//   - the same bytes moved by plain MPI calls (those of a Pull and a Push:
//     counts, keys, rows back, counts, keys, gradients, with the Cluster's
//     counts; one MPI_Alltoall and two MPI_Alltoallv each)
//     in the same run: the ratio plain / Cluster exchange is the exchange's
//     efficiency;
//   - bytes sent across ranks per batch, counted by the Cluster and by the
//     model (8 + 4 * dim bytes per distinct remote key, for Pull and Push);
//   - at one rank, a plain Store's Pull + Push time on the same batches:
//     what the Cluster adds. The Store and the Cluster are both open and
//     warm, and are timed in --rounds alternating rounds (Store first in even
//     rounds, Cluster first in odd ones) so that a machine whose pace drifts
//     charges both alike; the ratio is the median of the rounds' ratios.
// Launch: mpirun -np R build/bin/strata_cluster_bench --dir DIR [--json].
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/hash.h"
#include "cluster/key_router.h"
#include "strata/cluster.h"
#include "strata/store.h"

namespace strata {
namespace {

struct Args {
  std::string dir;
  uint64_t batches = 200;
  uint64_t keys = 4096;
  uint32_t dim = 16;
  uint64_t key_space = 1 << 20;
  uint32_t rounds = 7;
  bool json = false;
};

std::vector<Key> BatchKeys(const Args& a, int rank, uint64_t b) {
  SplitMix64 rng(b * 65537 + uint64_t(rank) + 1);
  std::vector<Key> keys(a.keys);
  for (Key& k : keys) k = rng.Next() % a.key_space;
  return keys;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

StoreOptions Options(const Args& a, const std::string& dir) {
  StoreOptions o;
  o.dir = dir;
  o.device_rows_max = a.key_space * 2;  // every row stays in T0: the exchange is measured
  o.dram_rows_max = a.key_space;
  o.use_gpu = false;
  return o;
}

std::vector<TableOptions> Tables(const Args& a) {
  TableOptions t;
  t.name = "bench";
  t.dim = a.dim;
  t.optimizer.kind = Optimizer::kSgd;
  return {t};
}

void Die(const Status& s, int rank) {
  std::fprintf(stderr, "strata_cluster_bench: rank %d: %s\n", rank, s.ToString().c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

// Seconds of Pull + Push + AdvanceClock over the batches, slowest rank.
// The batches are drawn before the clock starts.
template <typename PullFn, typename PushFn, typename AdvanceFn>
double TimeBatches(const Args& a, int rank, PullFn pull, PushFn push, AdvanceFn advance) {
  std::vector<float> rows(a.keys * a.dim), grads(a.keys * a.dim, 0.001f);
  std::vector<std::vector<Key>> batches(a.batches);
  for (uint64_t b = 0; b < a.batches; ++b) batches[b] = BatchKeys(a, rank, b);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = Now();
  for (const std::vector<Key>& keys : batches) {
    Status s = pull(keys, rows.data());
    if (s.ok()) s = push(keys, grads.data());
    if (s.ok()) s = advance();
    if (!s.ok()) Die(s, rank);
  }
  double secs = Now() - start, slowest = 0;
  MPI_Allreduce(&secs, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

// Plain MPI_Alltoallv of the Cluster's counts for every batch; also the
// model's bytes across ranks (summed over ranks). Seconds, slowest rank.
double TimePlainAlltoallv(const Args& a, int rank, int world, uint64_t* model_bytes) {
  cluster::KeyRouter router;
  std::vector<int> send(world), recv(world), sdispl(world), rdispl(world);
  std::vector<uint64_t> keys_out, keys_in;
  std::vector<float> rows_out, rows_in;
  MPI_Datatype row;
  MPI_Type_contiguous(static_cast<int>(a.dim), MPI_FLOAT, &row);
  MPI_Type_commit(&row);
  uint64_t bytes = 0;
  double in_mpi = 0;
  for (uint64_t b = 0; b < a.batches; ++b) {
    router.Route(0, BatchKeys(a, rank, b), static_cast<uint32_t>(world));
    for (int r = 0; r < world; ++r) send[r] = router.counts()[r];
    MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int sent = 0, got = 0;
    for (int r = 0; r < world; ++r) {
      sdispl[r] = sent;
      rdispl[r] = got;
      sent += send[r];
      got += recv[r];
      if (r != rank) bytes += uint64_t(send[r]) * 2 * (sizeof(Key) + a.dim * sizeof(float));
    }
    keys_out.assign(router.grouped().begin(), router.grouped().end());
    keys_in.resize(got);
    rows_out.resize(size_t(sent) * a.dim);
    rows_in.resize(size_t(got) * a.dim);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = Now();
    // Pull: counts, keys out, rows back; Push: counts, keys and gradients
    // out (the Cluster sends its counts in a header per call, timed too).
    MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoallv(keys_out.data(), send.data(), sdispl.data(), MPI_UINT64_T, keys_in.data(),
                  recv.data(), rdispl.data(), MPI_UINT64_T, MPI_COMM_WORLD);
    MPI_Alltoallv(rows_in.data(), recv.data(), rdispl.data(), row, rows_out.data(), send.data(),
                  sdispl.data(), row, MPI_COMM_WORLD);
    MPI_Alltoall(send.data(), 1, MPI_INT, recv.data(), 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoallv(keys_out.data(), send.data(), sdispl.data(), MPI_UINT64_T, keys_in.data(),
                  recv.data(), rdispl.data(), MPI_UINT64_T, MPI_COMM_WORLD);
    MPI_Alltoallv(rows_out.data(), send.data(), sdispl.data(), row, rows_in.data(), recv.data(),
                  rdispl.data(), row, MPI_COMM_WORLD);
    in_mpi += Now() - start;
  }
  MPI_Type_free(&row);
  MPI_Allreduce(&bytes, model_bytes, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  double slowest = 0;
  MPI_Allreduce(&in_mpi, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// One rank: the Cluster over its one shard against a plain Store, both open
// and warm, in alternating rounds. Fills the one-rank fields of `j`.
template <typename TimeCluster>
void CompareWithStore(const Args& a, TimeCluster time_cluster, nlohmann::json* j) {
  auto store = Store::Open(Options(a, a.dir + "/store"), Tables(a));
  if (!store.ok()) Die(store.status(), 0);
  Store& st = **store;
  auto sw = st.RegisterWorker(-1);
  if (!sw.ok()) Die(sw.status(), 0);
  auto spull = [&](std::span<const Key> k, float* out) { return st.Pull(*sw, 0, k, out); };
  auto spush = [&](std::span<const Key> k, const float* g) { return st.Push(*sw, 0, k, g); };
  auto sadvance = [&] { return st.AdvanceClock(*sw); };
  auto time_store = [&] { return TimeBatches(a, 0, spull, spush, sadvance); };
  time_store();  // first touch creates the rows
  std::vector<double> store_s, cluster_s, ratios;
  for (uint32_t r = 0; r < a.rounds; ++r) {
    double s = 0, c = 0;
    if (r % 2 == 0) {
      s = time_store();
      c = time_cluster();
    } else {
      c = time_cluster();
      s = time_store();
    }
    store_s.push_back(s);
    cluster_s.push_back(c);
    ratios.push_back(s > 0 ? c / s : 0);
  }
  if (Status s = st.Close(); !s.ok()) Die(s, 0);
  const double n = double(a.batches);
  (*j)["rounds"] = a.rounds;
  (*j)["store_ms_per_batch"] = Median(store_s) * 1e3 / n;
  (*j)["cluster_ms_per_batch_rounds"] = Median(cluster_s) * 1e3 / n;
  (*j)["cluster_over_store"] = Median(ratios);
  (*j)["cluster_over_store_min"] = *std::min_element(ratios.begin(), ratios.end());
  (*j)["cluster_over_store_max"] = *std::max_element(ratios.begin(), ratios.end());
}

int Run(const Args& a, int rank, int world) {
  ClusterOptions options;
  options.store = Options(a, a.dir + "/cluster");
  auto cluster = Cluster::Open(options, Tables(a), MPI_COMM_WORLD);
  if (!cluster.ok()) Die(cluster.status(), rank);
  Cluster& c = **cluster;
  auto w = c.RegisterWorker();
  if (!w.ok()) Die(w.status(), rank);
  // First touch creates the rows; the measured pass finds them in T0.
  auto pull = [&](std::span<const Key> k, float* out) { return c.Pull(*w, 0, k, out); };
  auto push = [&](std::span<const Key> k, const float* g) { return c.Push(*w, 0, k, g); };
  auto advance = [&] { return c.AdvanceClock(*w); };
  TimeBatches(a, rank, pull, push, advance);
  nlohmann::json one_rank;
  if (world == 1) {
    CompareWithStore(
        a, [&] { return TimeBatches(a, rank, pull, push, advance); }, &one_rank);
  }
  auto before = c.SummedStats();
  uint64_t exchange_us_before = c.Stats().exchange.exchange_us;
  const double cluster_s = TimeBatches(a, rank, pull, push, advance);
  auto after = c.SummedStats();
  if (!before.ok() || !after.ok()) Die(after.status(), rank);
  double exchange_s = double(c.Stats().exchange.exchange_us - exchange_us_before) / 1e6;
  double exchange_slowest = 0, exchange_fastest = 0;
  MPI_Allreduce(&exchange_s, &exchange_slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&exchange_s, &exchange_fastest, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
  const uint64_t sent = after->exchange.bytes_sent - before->exchange.bytes_sent;
  uint64_t model_bytes = 0;
  const double plain_s = TimePlainAlltoallv(a, rank, world, &model_bytes);
  if (Status s = c.Close(); !s.ok()) Die(s, rank);

  if (rank != 0) return 0;
  const double n = double(a.batches);
  nlohmann::json j = {
      {"ranks", world},
      {"batches", a.batches},
      {"keys_per_rank_batch", a.keys},
      {"dim", a.dim},
      {"cluster_ms_per_batch", cluster_s * 1e3 / n},
      {"exchange_ms_per_batch", exchange_slowest * 1e3 / n},
      {"plain_alltoallv_ms_per_batch", plain_s * 1e3 / n},
      {"plain_over_exchange", exchange_slowest > 0 ? plain_s / exchange_slowest : 0},
      // The rank that waited least in the exchange: nearer the transfer alone.
      {"exchange_fastest_rank_ms_per_batch", exchange_fastest * 1e3 / n},
      {"plain_over_exchange_fastest_rank", exchange_fastest > 0 ? plain_s / exchange_fastest : 0},
      {"bytes_sent_per_batch", double(sent) / n},
      {"model_bytes_per_batch", double(model_bytes) / n}};
  if (world == 1) j.update(one_rank);
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    for (auto& [k, v] : j.items()) std::printf("%-30s %s\n", k.c_str(), v.dump().c_str());
  }
  return 0;
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

int Main(int argc, char** argv, int rank, int world) {
  Args a;
  CLI::App app("strata_cluster_bench: the Cluster's exchange against plain MPI_Alltoallv");
  app.add_option("--dir", a.dir, "the cluster's directory (must be empty or missing)")->required();
  app.add_option("--batches", a.batches, "measured batches (after as many to warm up)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  app.add_option("--keys", a.keys, "keys per rank per batch")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24));
  app.add_option("--dim", a.dim, "embedding floats per row")->check(CLI::Range(1u, kTableDimMax));
  app.add_option("--key-space", a.key_space, "keys drawn uniformly from [0, this)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--rounds", a.rounds, "one rank: alternating Store and Cluster rounds")
      ->check(CLI::Range(1u, 1000u));
  app.add_flag("--json", a.json, "one JSON line instead of a table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return Run(a, rank, world);
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  int rc = 1;
  try {
    rc = strata::Main(argc, argv, rank, world);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_cluster_bench: rank %d: %s\n", rank, e.what());
  }
  MPI_Finalize();
  return rc;
}
