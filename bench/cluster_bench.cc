// strata_cluster_bench: the Cluster's exchange measured under mpirun
// (docs/cluster.md, "Measured"). Every rank pulls and pushes `--keys` uniform
// keys of one table per batch; the program reports, on rank 0, as a table or
// --json (per batch, the slowest rank's time unless a field says fastest):
//   - the Cluster's Pull + Push + AdvanceClock time, and the part of it in
//     its all-to-alls (ClusterStats::exchange.exchange_us; five per batch:
//     header, keys and rows of Pull, header and keys with gradients of Push);
//   - at two ranks or more, the same for a second Cluster opened with
//     ClusterOptions::align_exchanges (a barrier before and after each of
//     its all-to-alls): its exchange timed alone (aligned_*);
//   - the same bytes moved by plain MPI calls in the Cluster's shape (those
//     of a Pull and a Push: counts, keys, rows back, counts, keys with their
//     gradients, with the Cluster's counts; MPI_Alltoall for the counts,
//     MPI_Alltoallv for the rest), once after one
//     barrier per batch (plain_alltoallv_*) and once with a barrier before
//     each call (plain_aligned_*). plain_aligned_over_exchange_aligned is
//     the exchange's efficiency: both sides timed the same way;
//     plain_over_exchange also charges the Cluster its ranks' wait for one
//     another;
//   - bytes sent across ranks, counted by each Cluster and by the model
//     (8 + 4 * dim bytes per distinct remote key, for Pull and Push);
//   - at one rank, a plain Store's Pull + Push time on the same batches:
//     what the Cluster adds. The Store and the Cluster are both open and
//     warm, and are timed in --rounds alternating rounds (Store first in even
//     rounds, Cluster first in odd ones) so that a machine whose pace drifts
//     charges both alike; the ratio is the median of the rounds' ratios.
// Every measured batch runs on both Clusters and the plain calls, in an
// order that rotates, so a drifting machine charges all alike.
// Launch: mpirun -np R build/bin/strata_cluster_bench --dir DIR [--json], or
// mpirun -np R build/bin/strata bench cluster --dir DIR [--json].
#include "bench/cluster_bench.h"

#include <mpi.h>

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

namespace strata::bench {
namespace {

using Args = ClusterBenchArgs;

// The measured batches' keys, drawn ahead, per rank.
constexpr uint64_t kBatchKeyBytesMax = uint64_t{1} << 30;

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

// The plain MPI calls of one batch: what a Pull and a Push of the Cluster
// move, in the Cluster's shape (Pull: counts, keys, rows back; Push: counts,
// then each key with its gradients in one item), with the Cluster's counts.
class PlainExchange {
 public:
  PlainExchange(const Args& a, int rank, int world)
      : dim_(a.dim),
        rank_(rank),
        world_(world),
        send_(world),
        recv_(world),
        sdispl_(world),
        rdispl_(world) {
    MPI_Type_contiguous(static_cast<int>(a.dim), MPI_FLOAT, &row_);
    MPI_Type_commit(&row_);
    MPI_Type_contiguous(static_cast<int>(kItemFloats + a.dim), MPI_FLOAT, &item_);
    MPI_Type_commit(&item_);
  }
  ~PlainExchange() {
    MPI_Type_free(&row_);
    MPI_Type_free(&item_);
  }
  PlainExchange(const PlainExchange&) = delete;
  PlainExchange& operator=(const PlainExchange&) = delete;

  // Untimed: routes a batch's keys as the Cluster does and learns the
  // counts. Returns the model's bytes this rank sends other ranks in the
  // batch: 8 + 4 * dim per distinct key, for Pull and for Push.
  uint64_t Prepare(std::span<const Key> keys) {
    router_.Route(0, keys, static_cast<uint32_t>(world_));
    for (int r = 0; r < world_; ++r) send_[r] = router_.counts()[r];
    MPI_Alltoall(send_.data(), 1, MPI_INT, recv_.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int sent = 0, got = 0;
    uint64_t bytes = 0;
    for (int r = 0; r < world_; ++r) {
      sdispl_[r] = sent;
      rdispl_[r] = got;
      sent += send_[r];
      got += recv_[r];
      if (r != rank_) bytes += uint64_t(send_[r]) * 2 * (sizeof(Key) + dim_ * sizeof(float));
    }
    keys_out_.assign(router_.grouped().begin(), router_.grouped().end());
    keys_in_.resize(got);
    rows_out_.resize(size_t(sent) * dim_);
    rows_in_.resize(size_t(got) * dim_);
    items_out_.resize(size_t(sent) * (kItemFloats + dim_));
    items_in_.resize(size_t(got) * (kItemFloats + dim_));
    return bytes;
  }

  // The five calls, in seconds. aligned = false: one barrier, then the six
  // back to back, timed together. aligned = true: a barrier before each
  // call and after the last, and only the calls timed (as
  // ClusterOptions::align_exchanges times the Cluster's).
  double Run(bool aligned) {
    double in_calls = 0, start = 0;
    auto call = [&](auto&& fn) {
      if (aligned) {
        MPI_Barrier(MPI_COMM_WORLD);
        start = Now();
      }
      fn();
      if (aligned) in_calls += Now() - start;
    };
    MPI_Comm w = MPI_COMM_WORLD;
    if (!aligned) {
      MPI_Barrier(w);
      start = Now();
    }
    // Pull: counts, keys to the owners, rows back.
    call([&] { MPI_Alltoall(send_.data(), 1, MPI_INT, recv_.data(), 1, MPI_INT, w); });
    call([&] {
      MPI_Alltoallv(keys_out_.data(), send_.data(), sdispl_.data(), MPI_UINT64_T, keys_in_.data(),
                    recv_.data(), rdispl_.data(), MPI_UINT64_T, w);
    });
    call([&] {
      MPI_Alltoallv(rows_in_.data(), recv_.data(), rdispl_.data(), row_, rows_out_.data(),
                    send_.data(), sdispl_.data(), row_, w);
    });
    // Push: counts, then keys with their gradients to the owners.
    call([&] { MPI_Alltoall(send_.data(), 1, MPI_INT, recv_.data(), 1, MPI_INT, w); });
    call([&] {
      MPI_Alltoallv(items_out_.data(), send_.data(), sdispl_.data(), item_, items_in_.data(),
                    recv_.data(), rdispl_.data(), item_, w);
    });
    if (!aligned) return Now() - start;
    MPI_Barrier(w);
    return in_calls;
  }

  static constexpr int kCallsPerBatch = 5;
  static constexpr uint32_t kItemFloats = sizeof(Key) / sizeof(float);  // a key in an item

 private:
  const uint32_t dim_;
  const int rank_, world_;
  cluster::KeyRouter router_;
  std::vector<int> send_, recv_, sdispl_, rdispl_;
  std::vector<uint64_t> keys_out_, keys_in_;
  std::vector<float> rows_out_, rows_in_, items_out_, items_in_;
  MPI_Datatype row_, item_;
};

// Over the ranks: the largest and the smallest of a rank's value.
void MaxMin(double mine, double* max, double* min) {
  MPI_Allreduce(&mine, max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, min, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
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

// A Cluster over DIR/<name> with one worker.
struct BenchCluster {
  std::unique_ptr<Cluster> cluster;
  WorkerId worker = 0;

  BenchCluster(const Args& a, int rank, const std::string& name, bool align) {
    ClusterOptions options;
    options.store = Options(a, a.dir + "/" + name);
    options.align_exchanges = align;
    if (a.timeout_ms != Args::kDefaultTimeout) options.collective_timeout_ms = a.timeout_ms;
    auto opened = Cluster::Open(options, Tables(a), MPI_COMM_WORLD);
    if (!opened.ok()) Die(opened.status(), rank);
    cluster = std::move(*opened);
    auto w = cluster->RegisterWorker();
    if (!w.ok()) Die(w.status(), rank);
    worker = *w;
  }
  auto pull() {
    return [this](std::span<const Key> k, float* out) { return cluster->Pull(worker, 0, k, out); };
  }
  auto push() {
    return
        [this](std::span<const Key> k, const float* g) { return cluster->Push(worker, 0, k, g); };
  }
  auto advance() {
    return [this] { return cluster->AdvanceClock(worker); };
  }
  // One batch's Pull + Push + AdvanceClock after a barrier, in seconds.
  double TimeBatch(int rank, std::span<const Key> keys, float* rows, const float* grads) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = Now();
    Status s = cluster->Pull(worker, 0, keys, rows);
    if (s.ok()) s = cluster->Push(worker, 0, keys, grads);
    if (s.ok()) s = cluster->AdvanceClock(worker);
    if (!s.ok()) Die(s, rank);
    return Now() - start;
  }
  ClusterExchangeStats Summed(int rank) {
    auto summed = cluster->SummedStats();
    if (!summed.ok()) Die(summed.status(), rank);
    return summed->exchange;
  }
};

// What one Cluster did over the measured batches, per rank.
struct ClusterTimes {
  double batch_s = 0;  // Pull + Push + AdvanceClock
  ClusterExchangeStats before, after, summed_before, summed_after;
  double ExchangeSeconds() const { return double(after.exchange_us - before.exchange_us) / 1e6; }
  double WaitSeconds() const { return double(after.align_wait_us - before.align_wait_us) / 1e6; }
};

int Run(const Args& a, int rank, int world) {
  BenchCluster flat(a, rank, "cluster", false);
  // The same Cluster with a barrier before each of its all-to-alls
  // (ClusterOptions::align_exchanges): its exchange timed alone, as the
  // plain calls are.
  std::unique_ptr<BenchCluster> aligned;
  if (world > 1) aligned = std::make_unique<BenchCluster>(a, rank, "aligned", true);
  // First touch creates the rows; the measured passes find them in T0.
  TimeBatches(a, rank, flat.pull(), flat.push(), flat.advance());
  if (aligned) TimeBatches(a, rank, aligned->pull(), aligned->push(), aligned->advance());
  nlohmann::json one_rank;
  if (world == 1) {
    CompareWithStore(
        a, [&] { return TimeBatches(a, rank, flat.pull(), flat.push(), flat.advance()); },
        &one_rank);
  }

  // Every measured batch runs on the Cluster, the aligned Cluster and the
  // plain calls in turn, so that a machine whose pace drifts charges all
  // alike. The batches are drawn, and the plain calls' counts exchanged,
  // before the clock starts.
  std::vector<std::vector<Key>> batches(a.batches);
  for (uint64_t b = 0; b < a.batches; ++b) batches[b] = BatchKeys(a, rank, b);
  std::vector<float> rows(a.keys * a.dim), grads(a.keys * a.dim, 0.001f);
  PlainExchange plain(a, rank, world);
  ClusterTimes ft, at;
  ft.summed_before = flat.Summed(rank);
  if (aligned) at.summed_before = aligned->Summed(rank);
  ft.before = flat.cluster->Stats().exchange;
  if (aligned) at.before = aligned->cluster->Stats().exchange;
  uint64_t my_model_bytes = 0;
  double plain_s = 0, plain_aligned_s = 0;
  for (uint64_t b = 0; b < a.batches; ++b) {
    const std::vector<Key>& keys = batches[b];
    my_model_bytes += plain.Prepare(keys);
    // The three in turn, first the one b % 3 names: what runs just before
    // (the work a Store's threads do after a batch) falls on each alike.
    for (uint64_t i = 0; i < 3; ++i) {
      switch ((b + i) % 3) {
        case 0:
          ft.batch_s += flat.TimeBatch(rank, keys, rows.data(), grads.data());
          break;
        case 1:
          if (aligned) at.batch_s += aligned->TimeBatch(rank, keys, rows.data(), grads.data());
          break;
        default:
          plain_s += plain.Run(/*aligned=*/false);
          plain_aligned_s += plain.Run(/*aligned=*/true);
      }
    }
  }
  ft.after = flat.cluster->Stats().exchange;
  if (aligned) at.after = aligned->cluster->Stats().exchange;
  ft.summed_after = flat.Summed(rank);
  if (aligned) at.summed_after = aligned->Summed(rank);
  uint64_t model_bytes = 0;
  MPI_Allreduce(&my_model_bytes, &model_bytes, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);

  // Per batch, the slowest rank's (and for the exchanges the fastest's).
  const double ms = 1e3 / double(a.batches);
  double cluster_max, cluster_min, exchange_max, exchange_min, plain_max, plain_min;
  MaxMin(ft.batch_s, &cluster_max, &cluster_min);
  MaxMin(ft.ExchangeSeconds(), &exchange_max, &exchange_min);
  MaxMin(plain_s, &plain_max, &plain_min);
  double a_cluster_max, a_cluster_min, a_exchange_max, a_exchange_min, a_wait_max, a_wait_min,
      a_plain_max, a_plain_min;
  MaxMin(at.batch_s, &a_cluster_max, &a_cluster_min);
  MaxMin(at.ExchangeSeconds(), &a_exchange_max, &a_exchange_min);
  MaxMin(at.WaitSeconds(), &a_wait_max, &a_wait_min);
  MaxMin(plain_aligned_s, &a_plain_max, &a_plain_min);
  if (Status s = flat.cluster->Close(); !s.ok()) Die(s, rank);
  if (aligned) {
    if (Status s = aligned->cluster->Close(); !s.ok()) Die(s, rank);
  }

  if (rank != 0) return 0;
  auto ratio = [](double num, double den) { return den > 0 ? num / den : 0.0; };
  auto per_batch = [&](uint64_t after, uint64_t before) {
    return double(after - before) / double(a.batches);
  };
  nlohmann::json j = {
      {"ranks", world},
      {"batches", a.batches},
      {"keys_per_rank_batch", a.keys},
      {"dim", a.dim},
      {"cluster_ms_per_batch", cluster_max * ms},
      {"exchange_ms_per_batch", exchange_max * ms},
      {"exchange_calls_per_batch", per_batch(ft.after.exchange_calls, ft.before.exchange_calls)},
      {"plain_alltoallv_ms_per_batch", plain_max * ms},
      {"plain_calls_per_batch", PlainExchange::kCallsPerBatch},
      {"plain_over_exchange", ratio(plain_max, exchange_max)},
      // The rank that waited least in the exchange, against the plain calls'
      // fastest rank: nearer the transfer alone.
      {"exchange_fastest_rank_ms_per_batch", exchange_min * ms},
      {"plain_over_exchange_fastest_rank", ratio(plain_min, exchange_min)},
      {"bytes_sent_per_batch", per_batch(ft.summed_after.bytes_sent, ft.summed_before.bytes_sent)},
      {"model_bytes_per_batch", double(model_bytes) / double(a.batches)}};
  if (aligned) {
    j.update({
        {"aligned_cluster_ms_per_batch", a_cluster_max * ms},
        {"aligned_exchange_ms_per_batch", a_exchange_max * ms},
        {"aligned_exchange_fastest_rank_ms_per_batch", a_exchange_min * ms},
        {"aligned_wait_ms_per_batch", a_wait_max * ms},
        {"aligned_exchange_calls_per_batch",
         per_batch(at.after.exchange_calls, at.before.exchange_calls)},
        {"plain_aligned_ms_per_batch", a_plain_max * ms},
        {"plain_aligned_fastest_rank_ms_per_batch", a_plain_min * ms},
        // The ratio: the same bytes, every call after a barrier on both sides.
        {"plain_aligned_over_exchange_aligned", ratio(a_plain_max, a_exchange_max)},
        {"aligned_bytes_sent_per_batch",
         per_batch(at.summed_after.bytes_sent, at.summed_before.bytes_sent)},
    });
  }
  if (world == 1) j.update(one_rank);
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
  } else {
    for (auto& [k, v] : j.items()) std::printf("%-44s %s\n", k.c_str(), v.dump().c_str());
  }
  return 0;
}

}  // namespace

int RunClusterBench(const ClusterBenchArgs& a) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (a.dir.empty()) {  // every rank sees the same flags, so all stop here
    if (rank == 0) std::fprintf(stderr, "strata bench cluster: --dir must not be empty\n");
    return 2;
  }
  // Every batch's keys are drawn before the clock starts.
  if (a.keys > kBatchKeyBytesMax / sizeof(Key) / a.batches) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "strata bench cluster: --batches %llu x --keys %llu: the keys are drawn "
                   "ahead, %llu bytes per rank at most; use fewer batches or keys\n",
                   static_cast<unsigned long long>(a.batches),
                   static_cast<unsigned long long>(a.keys),
                   static_cast<unsigned long long>(kBatchKeyBytesMax));
    }
    return 2;
  }
  return Run(a, rank, world);
}

}  // namespace strata::bench
