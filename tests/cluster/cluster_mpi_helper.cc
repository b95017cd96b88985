// cluster_mpi_helper: the program tests/cluster/cluster_mpi_test.cc runs
// under `mpirun -np R`. Each rank runs one scenario and prints one line,
//   cluster-helper rank <r>/<R> PASS|FAIL <scenario>: <detail>
// and exits non-zero on FAIL. Scenarios (argv[1]; argv[2] a directory):
//   pull_push DIR    Cluster Pull/Push/Intent/AdvanceClock against a
//                    single-process Store (every rank keeps one in
//                    DIR/ref-<r> and applies every rank's batches to it):
//                    rows equal; a checkpoint, close and reopen half-way;
//                    every shard holds only rows it owns, equal to the model
//   bad_input DIR    errors that must be the same on every rank: mismatched
//                    tables or align_exchanges at Open, a missing table on
//                    one rank, ranks naming different tables; then a good
//                    Pull still works
//   stall DIR        the last rank stops: the others fail within the timeout
//   create DIR       a cluster at generation 1 (one batch, a checkpoint)
//   reopen DIR       Open on an existing cluster directory; prints the Status
//                    (the test expects a world-size or generation error)
//   train DIR POINT  steps 0-4, a checkpoint (generation 1), steps 4-8, a
//                    checkpoint (generation 2), closed; with POINT other than
//                    "none" one rank dies (SIGKILL, through io::FaultEnv on
//                    the cluster's files) in the second checkpoint:
//                      backup    the last rank, copying its shard
//                      record    the last rank, recording generation 2
//                                (after its shard's checkpoint)
//                      manifest  rank 0, writing CLUSTER (every shard at 2)
//   verify DIR CLOCK WORLD
//                    Open (recovering what a crash left), the clock must be
//                    CLOCK on every rank; every shard row equals a
//                    single-process Store that applied the batches of WORLD
//                    ranks up to CLOCK; two more steps against it (the
//                    optimizer state went along), a checkpoint, closed
//   two_phase DIR    a flat and a two-phase cluster (topology: the file or
//                    fixture STRATA_HELPER_TOPOLOGY names) take the same
//                    Pull/Push/AdvanceClock sequence: every pulled row and
//                    every shard row bit-identical; the two-phase one
//                    forwarded bytes, the flat one none
//   dense_sync DIR   strata::DenseSync at k = 1 and k = 10 over 20 steps
//                    against a model of every rank's Adam in one process:
//                    parameters within 1e-5 after every step, identical on
//                    every rank after each merge; bytes all-reduced at k = 10
//                    are a tenth of k = 1's
// Test code only.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/hash.h"
#include "cluster/cluster_impl.h"
#include "io/fault_env.h"
#include "strata/cluster.h"
#include "strata/dense_sync.h"
#include "strata/store.h"

namespace strata {
namespace {

int g_rank = 0;
int g_world = 1;
// Batches of pull_push (half before the reopen): every collective costs a
// scheduling round of all ranks, slow on two loaded cores.
constexpr int kSteps = 8;

[[noreturn]] void Finish(bool pass, const std::string& scenario, const std::string& detail) {
  std::printf("cluster-helper rank %d/%d %s %s: %s\n", g_rank, g_world, pass ? "PASS" : "FAIL",
              scenario.c_str(), detail.c_str());
  std::fflush(stdout);
  if (!pass) MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may wait in a collective
  MPI_Finalize();
  std::exit(0);
}

#define HELPER_CHECK(scenario, cond, detail)                                    \
  do {                                                                          \
    if (!(cond)) Finish(false, scenario, std::string(#cond) + ": " + (detail)); \
  } while (0)

std::vector<TableOptions> Tables(uint32_t dim_of_b = 4) {
  TableOptions a;
  a.name = "a";
  a.dim = 8;
  a.optimizer.kind = Optimizer::kAdagrad;
  a.optimizer.learning_rate = 0.25f;
  TableOptions b;
  b.name = "b";
  b.dim = dim_of_b;
  b.optimizer.kind = Optimizer::kSgd;
  b.optimizer.learning_rate = 0.5f;
  return {a, b};
}

StoreOptions SmallStore(const std::string& dir) {
  StoreOptions o;
  o.dir = dir;
  // Small T0: rows move between T0 and T1 (T1 holds them all; T1 evictions
  // under its cleaner are left to the Store's own tests). STRATA_HELPER_DRAM_ROWS
  // overrides T1's size.
  o.device_rows_max = 256;
  const char* dram = std::getenv("STRATA_HELPER_DRAM_ROWS");
  o.dram_rows_max = dram != nullptr ? std::strtoull(dram, nullptr, 10) : 4096;
  o.use_gpu = false;
  o.planner_round_us = 100;
  return o;
}

// Rank q's batch of table t at step s: keys from a small range (duplicates,
// keys shared across ranks) plus the extremes; gradients are multiples of
// 1/16, so every sum of them is exact in float whatever the order.
struct Batch {
  std::vector<Key> keys;
  std::vector<float> grads;
};
Batch MakeBatch(int step, int q, TableId t, uint32_t dim) {
  SplitMix64 rng(uint64_t(step) * 1000003 + uint64_t(q) * 7919 + t);
  Batch b;
  const int n = 40 + static_cast<int>(rng.Next() % 40);
  for (int i = 0; i < n; ++i) b.keys.push_back(rng.Next() % 300);
  if (step % 3 == q % 3) b.keys.push_back(kKeyMax);
  if (step % 4 == 1) b.keys.push_back(0);
  for (size_t i = 0; i < b.keys.size() * dim; ++i) {
    b.grads.push_back(static_cast<float>(static_cast<int>(rng.Next() % 33) - 16) / 16.0f);
  }
  return b;
}

float MaxDiff(const std::vector<float>& x, const std::vector<float>& y) {
  float d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::fabs(x[i] - y[i]));
  return x.size() == y.size() ? d : INFINITY;
}

// Every rank's batches of steps [from, to) of a cluster of `world` ranks,
// into the reference store alone (one Push per step and table, as the owners
// do).
void ApplyToRef(Store& ref, WorkerId ref_w, int from, int to, int world) {
  const std::vector<TableOptions> tables = Tables();
  for (int s = from; s < to; ++s) {
    for (TableId t = 0; t < tables.size(); ++t) {
      Batch all;
      for (int q = 0; q < world; ++q) {
        const Batch b = MakeBatch(s, q, t, tables[t].dim);
        all.keys.insert(all.keys.end(), b.keys.begin(), b.keys.end());
        all.grads.insert(all.grads.end(), b.grads.begin(), b.grads.end());
      }
      std::vector<float> rows(all.keys.size() * tables[t].dim);
      Status st = ref.Pull(ref_w, t, all.keys, rows.data());
      HELPER_CHECK("verify", st.ok(), st.ToString());
      st = ref.Push(ref_w, t, all.keys, all.grads.data());
      HELPER_CHECK("verify", st.ok(), st.ToString());
    }
    HELPER_CHECK("verify", ref.AdvanceClock(ref_w).ok(), "ref AdvanceClock");
  }
}

// Steps [from, to) on the cluster and on the reference store.
void RunSteps(Cluster& cluster, Store& ref, WorkerId w, WorkerId ref_w, int from, int to) {
  const std::vector<TableOptions> tables = Tables();
  for (int s = from; s < to; ++s) {
    for (TableId t = 0; t < tables.size(); ++t) {
      const uint32_t dim = tables[t].dim;
      const Batch next = MakeBatch(s + 1, g_rank, t, dim);
      HELPER_CHECK("pull_push", cluster.Intent(w, t, next.keys, s + 1, s + 2).ok(), "Intent");
      const Batch mine = MakeBatch(s, g_rank, t, dim);
      std::vector<float> got(mine.keys.size() * dim), want(mine.keys.size() * dim);
      Status st = cluster.Pull(w, t, mine.keys, got.data());
      HELPER_CHECK("pull_push", st.ok(), st.ToString());
      st = ref.Pull(ref_w, t, mine.keys, want.data());
      HELPER_CHECK("pull_push", st.ok(), st.ToString());
      const float diff = MaxDiff(got, want);
      HELPER_CHECK("pull_push", diff <= 1e-6f,
                   "step " + std::to_string(s) + " table " + std::to_string(t) +
                       ": pulled rows differ from the single store by " + std::to_string(diff));
      st = cluster.Push(w, t, mine.keys, mine.grads.data());
      HELPER_CHECK("pull_push", st.ok(), st.ToString());
      // The reference takes every rank's batch in one Push, as the owners do.
      Batch all;
      for (int q = 0; q < g_world; ++q) {
        const Batch b = MakeBatch(s, q, t, dim);
        all.keys.insert(all.keys.end(), b.keys.begin(), b.keys.end());
        all.grads.insert(all.grads.end(), b.grads.begin(), b.grads.end());
      }
      st = ref.Push(ref_w, t, all.keys, all.grads.data());
      HELPER_CHECK("pull_push", st.ok(), st.ToString());
    }
    HELPER_CHECK("pull_push", cluster.AdvanceClock(w).ok(), "AdvanceClock");
    HELPER_CHECK("pull_push", ref.AdvanceClock(ref_w).ok(), "ref AdvanceClock");
  }
}

std::unique_ptr<Cluster> OpenCluster(const std::string& dir, const std::string& scenario) {
  ClusterOptions options;
  options.store = SmallStore(dir + "/cluster");
  Result<std::unique_ptr<Cluster>> c = Cluster::Open(options, Tables(), MPI_COMM_WORLD);
  HELPER_CHECK(scenario, c.ok(), c.status().ToString());
  return std::move(c).value();
}

// Every shard row is owned by its rank and equals the reference's row.
uint64_t CheckShardRows(Cluster& cluster, Store& ref) {
  uint64_t rows = 0;
  for (TableId t = 0; t < cluster.Tables().size(); ++t) {
    Status st = cluster.shard().ScanTable(t, [&](Key key, std::span<const float> row) -> Status {
      HELPER_CHECK("pull_push", ClusterOwner(t, key, g_world) == uint32_t(g_rank),
                   "key " + std::to_string(key) + " in the wrong shard");
      std::vector<float> want(row.size());
      STRATA_RETURN_IF_ERROR(ref.Pull(0, t, std::span<const Key>(&key, 1), want.data()));
      HELPER_CHECK("pull_push", MaxDiff(std::vector<float>(row.begin(), row.end()), want) <= 1e-6f,
                   "shard row of key " + std::to_string(key) + " differs from the model");
      ++rows;
      return Status::Ok();
    });
    HELPER_CHECK("pull_push", st.ok(), st.ToString());
  }
  return rows;
}

void PullPush(const std::string& dir) {
  Result<std::unique_ptr<Store>> ref =
      Store::Open(SmallStore(dir + "/ref-" + std::to_string(g_rank)), Tables());
  HELPER_CHECK("pull_push", ref.ok(), ref.status().ToString());
  Result<WorkerId> ref_w = (*ref)->RegisterWorker(-1);
  HELPER_CHECK("pull_push", ref_w.ok(), ref_w.status().ToString());
  std::unique_ptr<Cluster> cluster = OpenCluster(dir, "pull_push");
  Result<WorkerId> w = cluster->RegisterWorker();
  HELPER_CHECK("pull_push", w.ok(), w.status().ToString());
  RunSteps(*cluster, **ref, *w, *ref_w, 0, kSteps / 2);
  HELPER_CHECK("pull_push", cluster->DrainIntents().ok(), "DrainIntents");
  Status st = cluster->Checkpoint();
  HELPER_CHECK("pull_push", st.ok(), st.ToString());
  HELPER_CHECK("pull_push", cluster->Close().ok(), "Close");
  cluster.reset();
  cluster = OpenCluster(dir, "pull_push");  // at generation 1, clocks restored
  w = cluster->RegisterWorker();
  HELPER_CHECK("pull_push", w.ok() && *cluster->CurrentClock(*w) == kSteps / 2,
               "clock after reopen");
  RunSteps(*cluster, **ref, *w, *ref_w, kSteps / 2, kSteps);
  st = cluster->Checkpoint();
  HELPER_CHECK("pull_push", st.ok(), st.ToString());
  const uint64_t rows = CheckShardRows(*cluster, **ref);
  Result<ClusterStats> sum = cluster->SummedStats();
  HELPER_CHECK("pull_push", sum.ok(), sum.status().ToString());
  HELPER_CHECK("pull_push", sum->exchange.pull_calls == uint64_t(g_world) * kSteps,
               "pull calls since the reopen");
  HELPER_CHECK("pull_push", g_world == 1 || sum->exchange.bytes_sent > 0, "bytes sent");
  HELPER_CHECK("pull_push", sum->exchange.bytes_sent == sum->exchange.bytes_received,
               "bytes sent != received");
  HELPER_CHECK("pull_push", cluster->Close().ok(), "Close");
  Finish(true, "pull_push",
         std::to_string(rows) + " shard rows checked; " + std::to_string(sum->exchange.bytes_sent) +
             " bytes exchanged by all ranks");
}

// The same status on every rank (compared by hash across ranks).
bool SameOnEveryRank(const Status& st) {
  const std::string text = st.ToString();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  std::vector<uint64_t> all(g_world);
  MPI_Allgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (uint64_t x : all) {
    if (x != all[0]) return false;
  }
  return true;
}

void ExpectError(const Status& st, StatusCode code, const std::vector<std::string>& words,
                 const std::string& what) {
  HELPER_CHECK("bad_input", st.code() == code, what + ": " + st.ToString());
  for (const std::string& w : words) {
    HELPER_CHECK("bad_input", st.message().find(w) != std::string::npos,
                 what + ": '" + w + "' not in " + st.ToString());
  }
  HELPER_CHECK("bad_input", SameOnEveryRank(st), what + ": ranks differ: " + st.ToString());
}

void BadInput(const std::string& dir) {
  const int last = g_world - 1;
  const std::string last_name = "rank " + std::to_string(last);
  if (g_world > 1) {  // The last rank's table "b" has another dim.
    ClusterOptions options;
    options.store = SmallStore(dir + "/bad-tables");
    Result<std::unique_ptr<Cluster>> c =
        Cluster::Open(options, Tables(g_rank == last ? 6 : 4), MPI_COMM_WORLD);
    ExpectError(c.status(), StatusCode::kInvalidArgument, {last_name + "'s table 1", "'b'"},
                "mismatched tables");
    // The last rank alone asks for aligned exchanges: its barriers would
    // wait for calls the others never make.
    options.store = SmallStore(dir + "/bad-align");
    options.align_exchanges = g_rank == last;
    c = Cluster::Open(options, Tables(4), MPI_COMM_WORLD);
    ExpectError(c.status(), StatusCode::kInvalidArgument, {last_name, "align_exchanges"},
                "mismatched align_exchanges");
  }
  std::unique_ptr<Cluster> cluster = OpenCluster(dir, "bad_input");
  Result<WorkerId> w = cluster->RegisterWorker();
  HELPER_CHECK("bad_input", w.ok(), w.status().ToString());
  const std::vector<Key> keys = {1, 2, 3, kKeyMax};
  std::vector<float> out(keys.size() * 8);
  // A table only the last rank gets wrong.
  Status st = cluster->Pull(*w, g_rank == last ? 7 : 0, keys, out.data());
  ExpectError(st, StatusCode::kInvalidArgument, {last_name, "table 7"}, "missing table");
  st = cluster->Push(*w, g_rank == last ? 7 : 0, keys, out.data());
  ExpectError(st, StatusCode::kInvalidArgument, {last_name, "table 7"}, "missing table in Push");
  // A null buffer on rank 0 only.
  st = cluster->Pull(*w, 0, keys, g_rank == 0 ? nullptr : out.data());
  ExpectError(st, StatusCode::kInvalidArgument, {"rank 0", "null"}, "null buffer");
  // A worker nobody registered, on every rank.
  st = cluster->AdvanceClock(*w + 1);
  ExpectError(st, StatusCode::kInvalidArgument, {"rank 0", "worker"}, "unregistered worker");
  if (g_world > 1) {  // Ranks naming different (existing) tables.
    st = cluster->Pull(*w, g_rank == last ? 1 : 0, keys, out.data());
    ExpectError(st, StatusCode::kInvalidArgument, {last_name, "names table 1"}, "different tables");
  }
  // The cluster still works after every refusal.
  st = cluster->Pull(*w, 0, keys, out.data());
  HELPER_CHECK("bad_input", st.ok(), st.ToString());
  HELPER_CHECK("bad_input", cluster->AdvanceClock(*w).ok(), "AdvanceClock");
  HELPER_CHECK("bad_input", cluster->Close().ok(), "Close");
  st = cluster->Pull(*w, 0, keys, out.data());
  ExpectError(st, StatusCode::kFailedPrecondition, {"closed"}, "Pull after Close");
  Finish(true, "bad_input", "every refusal the same on every rank");
}

// The last rank stops (SIGSTOP) before a Pull: the others' Pull returns
// Unavailable after the collective timeout, and so does their next call.
// Each survivor writes its line to DIR/stall-<rank>.txt too: once one rank
// leaves without MPI_Finalize, mpirun kills the rest, whose stdout may not
// have reached it. The survivors wait for each other on a communicator of
// their own; then rank 0 kills the stopped rank and they leave without
// MPI_Finalize (which would wait for it); mpirun reports the job as failed.
void Stall(const std::string& dir) {
  const int last = g_world - 1;
  std::vector<int> pids(g_world);
  const int pid = static_cast<int>(::getpid());
  MPI_Allgather(&pid, 1, MPI_INT, pids.data(), 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Comm survivors = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, g_rank == last ? MPI_UNDEFINED : 0, g_rank, &survivors);
  ClusterOptions options;
  options.store = SmallStore(dir + "/cluster");
  options.collective_timeout_ms = 5000;  // well above a loaded machine's collective
  Result<std::unique_ptr<Cluster>> c = Cluster::Open(options, Tables(), MPI_COMM_WORLD);
  HELPER_CHECK("stall", c.ok(), c.status().ToString());
  Cluster& cluster = **c;
  Result<WorkerId> w = cluster.RegisterWorker();
  HELPER_CHECK("stall", w.ok(), w.status().ToString());
  const std::vector<Key> keys = {1, 2, 3};
  std::vector<float> out(keys.size() * 8);
  HELPER_CHECK("stall", cluster.Pull(*w, 0, keys, out.data()).ok(), "first Pull");
  if (g_rank == last) ::raise(SIGSTOP);  // until rank 0 kills it
  const auto start = std::chrono::steady_clock::now();
  const Status st = cluster.Pull(*w, 0, keys, out.data());
  const double waited_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  HELPER_CHECK("stall", st.IsUnavailable(), st.ToString());
  HELPER_CHECK("stall", st.message().find("within 5000 ms") != std::string::npos, st.ToString());
  HELPER_CHECK("stall", waited_s >= 5.0, std::to_string(waited_s) + " s");
  const Status next = cluster.Push(*w, 0, keys, out.data());
  HELPER_CHECK("stall", next.IsUnavailable(), "the next call: " + next.ToString());
  char line[1024];
  std::snprintf(line, sizeof(line), "cluster-helper rank %d/%d PASS stall: %s (after %.1f s)\n",
                g_rank, g_world, st.ToString().c_str(), waited_s);
  std::fputs(line, stdout);
  std::fflush(stdout);
  const std::string file = dir + "/stall-" + std::to_string(g_rank) + ".txt";
  std::FILE* f = std::fopen(file.c_str(), "w");
  HELPER_CHECK("stall", f != nullptr, "cannot create " + file);
  const bool written = std::fputs(line, f) >= 0;
  HELPER_CHECK("stall", std::fclose(f) == 0 && written, "cannot write " + file);
  MPI_Barrier(survivors);
  if (g_rank == 0) ::kill(pids[last], SIGKILL);
  std::_Exit(0);
}

// A cluster at generation 1: one batch, a checkpoint, closed.
void Create(const std::string& dir) {
  std::unique_ptr<Cluster> cluster = OpenCluster(dir, "create");
  Result<WorkerId> w = cluster->RegisterWorker();
  HELPER_CHECK("create", w.ok(), w.status().ToString());
  const Batch b = MakeBatch(0, g_rank, 0, 8);
  std::vector<float> out(b.keys.size() * 8);
  HELPER_CHECK("create", cluster->Pull(*w, 0, b.keys, out.data()).ok(), "Pull");
  HELPER_CHECK("create", cluster->Push(*w, 0, b.keys, b.grads.data()).ok(), "Push");
  Status st = cluster->Checkpoint();
  HELPER_CHECK("create", st.ok(), st.ToString());
  HELPER_CHECK("create", cluster->Close().ok(), "Close");
  Finish(true, "create", "generation 1");
}

// A second cluster on the open cluster's directory is refused on every rank,
// with the lowest failing rank's error (rank 0's shard: every rank's is held); the first keeps
// pulling, pushing and checkpointing; once closed, the directory opens again.
void SecondOpen(const std::string& dir) {
  std::unique_ptr<Cluster> cluster = OpenCluster(dir, "second_open");
  ClusterOptions options;
  options.store = SmallStore(dir + "/cluster");
  Result<std::unique_ptr<Cluster>> second = Cluster::Open(options, Tables(), MPI_COMM_WORLD);
  HELPER_CHECK("second_open", second.status().IsUnavailable(), second.status().ToString());
  HELPER_CHECK("second_open", second.status().message().find("rank 0's shard") != std::string::npos,
               second.status().ToString());
  Result<WorkerId> w = cluster->RegisterWorker();
  HELPER_CHECK("second_open", w.ok(), w.status().ToString());
  const Batch b = MakeBatch(0, g_rank, 0, 8);
  std::vector<float> out(b.keys.size() * 8);
  HELPER_CHECK("second_open", cluster->Pull(*w, 0, b.keys, out.data()).ok(), "Pull");
  HELPER_CHECK("second_open", cluster->Push(*w, 0, b.keys, b.grads.data()).ok(), "Push");
  Status st = cluster->Checkpoint();
  HELPER_CHECK("second_open", st.ok(), st.ToString());
  HELPER_CHECK("second_open", cluster->Close().ok(), "Close");
  Result<std::unique_ptr<Cluster>> again = Cluster::Open(options, Tables(), MPI_COMM_WORLD);
  HELPER_CHECK("second_open", again.ok(), again.status().ToString());
  HELPER_CHECK("second_open", (*again)->Close().ok(), "Close");
  Finish(true, "second_open", "refused, then reopened");
}

// Steps, checkpoints, and a rank killed in the second checkpoint at `point`.
void Train(const std::string& dir, const std::string& point) {
  Result<std::unique_ptr<Store>> ref =
      Store::Open(SmallStore(dir + "/ref-" + std::to_string(g_rank)), Tables());
  HELPER_CHECK("train", ref.ok(), ref.status().ToString());
  Result<WorkerId> ref_w = (*ref)->RegisterWorker(-1);
  HELPER_CHECK("train", ref_w.ok(), ref_w.status().ToString());
  io::FaultEnv env(io::Env::Default());
  ClusterOptions options;
  options.store = SmallStore(dir + "/cluster");
  Result<std::unique_ptr<Cluster>> c =
      cluster::ClusterImpl::Open(options, Tables(), MPI_COMM_WORLD, &env);
  HELPER_CHECK("train", c.ok(), c.status().ToString());
  Cluster& cluster = **c;
  Result<WorkerId> w = cluster.RegisterWorker();
  HELPER_CHECK("train", w.ok(), w.status().ToString());
  RunSteps(cluster, **ref, *w, *ref_w, 0, kSteps / 2);
  Status st = cluster.Checkpoint();
  HELPER_CHECK("train", st.ok(), st.ToString());
  RunSteps(cluster, **ref, *w, *ref_w, kSteps / 2, kSteps);
  io::FaultRule kill;
  kill.kind = io::FaultKind::kKill;
  int victim = -1;
  if (point == "backup") {
    victim = g_world - 1;
    kill.op = io::FaultOp::kWrite;
    kill.path_substring = ".prev/";
  } else if (point == "record") {
    victim = g_world - 1;
    kill.op = io::FaultOp::kRename;
    kill.path_substring = "/CLUSTER_SHARD.tmp";
    kill.nth_call = 2;  // the first records "pending 2", the second "generation 2"
  } else if (point == "manifest") {
    victim = 0;
    kill.op = io::FaultOp::kRename;
    kill.path_substring = "/CLUSTER.tmp";
  } else {
    HELPER_CHECK("train", point == "none", "unknown kill point " + point);
  }
  if (g_rank == victim) HELPER_CHECK("train", env.AddRule(kill).ok(), "AddRule");
  st = cluster.Checkpoint();
  HELPER_CHECK("train", st.ok(), st.ToString());
  HELPER_CHECK("train", point == "none", "the checkpoint survived the kill at " + point);
  HELPER_CHECK("train", cluster.Close().ok(), "Close");
  Finish(true, "train", "generation 2");
}

// Reopens what Train (or a reshard of it) left, at clock `clock` on every
// rank, and checks every row against the batches of `world` ranks.
void Verify(const std::string& dir, int clock, int world) {
  Result<std::unique_ptr<Store>> ref =
      Store::Open(SmallStore(dir + "/vref-" + std::to_string(g_rank)), Tables());
  HELPER_CHECK("verify", ref.ok(), ref.status().ToString());
  Result<WorkerId> ref_w = (*ref)->RegisterWorker(-1);
  HELPER_CHECK("verify", ref_w.ok(), ref_w.status().ToString());
  std::unique_ptr<Cluster> cluster = OpenCluster(dir, "verify");
  Result<WorkerId> w = cluster->RegisterWorker();
  HELPER_CHECK("verify", w.ok(), w.status().ToString());
  Result<Clock> now = cluster->CurrentClock(*w);
  HELPER_CHECK("verify", now.ok() && *now == clock,
               "clock " + (now.ok() ? std::to_string(*now) : now.status().ToString()) +
                   ", expected " + std::to_string(clock));
  ApplyToRef(**ref, *ref_w, 0, clock, world);
  const uint64_t rows = CheckShardRows(*cluster, **ref);
  RunSteps(*cluster, **ref, *w, *ref_w, clock, clock + 2);
  const Status st = cluster->Checkpoint();
  HELPER_CHECK("verify", st.ok(), st.ToString());
  CheckShardRows(*cluster, **ref);
  HELPER_CHECK("verify", cluster->Close().ok(), "Close");
  Finish(true, "verify", "clock " + std::to_string(clock) + ", " + std::to_string(rows) + " rows");
}

void Reopen(const std::string& dir) {
  ClusterOptions options;
  options.store = SmallStore(dir + "/cluster");
  Result<std::unique_ptr<Cluster>> c = Cluster::Open(options, Tables(), MPI_COMM_WORLD);
  HELPER_CHECK("reopen", SameOnEveryRank(c.status()), "ranks differ: " + c.status().ToString());
  if (c.ok()) HELPER_CHECK("reopen", (*c)->Close().ok(), "Close");
  Finish(true, "reopen", c.status().ToString());
}

// Every row of `t` in this rank's shard, by key.
std::map<Key, std::vector<float>> ShardRows(Cluster& cluster, TableId t, const char* scenario) {
  std::map<Key, std::vector<float>> rows;
  Status st = cluster.shard().ScanTable(t, [&](Key key, std::span<const float> row) -> Status {
    rows[key].assign(row.begin(), row.end());
    return Status::Ok();
  });
  HELPER_CHECK(scenario, st.ok(), st.ToString());
  return rows;
}

void TwoPhase(const std::string& dir) {
  const char* topology = std::getenv("STRATA_HELPER_TOPOLOGY");
  HELPER_CHECK("two_phase", topology != nullptr, "STRATA_HELPER_TOPOLOGY is not set");
  ClusterOptions flat_options;
  flat_options.store = SmallStore(dir + "/flat");
  ClusterOptions two_options = flat_options;
  two_options.store.dir = dir + "/two-phase";
  two_options.exchange = ClusterExchange::kTwoPhase;
  two_options.topology = topology;
  Result<std::unique_ptr<Cluster>> flat = Cluster::Open(flat_options, Tables(), MPI_COMM_WORLD);
  HELPER_CHECK("two_phase", flat.ok(), flat.status().ToString());
  Result<std::unique_ptr<Cluster>> two = Cluster::Open(two_options, Tables(), MPI_COMM_WORLD);
  HELPER_CHECK("two_phase", two.ok(), two.status().ToString());
  Result<WorkerId> wf = (*flat)->RegisterWorker();
  Result<WorkerId> wt = (*two)->RegisterWorker();
  HELPER_CHECK("two_phase", wf.ok() && wt.ok(), "RegisterWorker");
  const std::vector<TableOptions> tables = Tables();
  for (int s = 0; s < kSteps; ++s) {
    for (TableId t = 0; t < tables.size(); ++t) {
      const uint32_t dim = tables[t].dim;
      const Batch mine = MakeBatch(s, g_rank, t, dim);
      std::vector<float> a(mine.keys.size() * dim), b(mine.keys.size() * dim);
      Status st = (*flat)->Pull(*wf, t, mine.keys, a.data());
      HELPER_CHECK("two_phase", st.ok(), st.ToString());
      st = (*two)->Pull(*wt, t, mine.keys, b.data());
      HELPER_CHECK("two_phase", st.ok(), st.ToString());
      HELPER_CHECK("two_phase", std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0,
                   "step " + std::to_string(s) + " table " + std::to_string(t) +
                       ": two-phase rows differ from flat");
      st = (*flat)->Push(*wf, t, mine.keys, mine.grads.data());
      HELPER_CHECK("two_phase", st.ok(), st.ToString());
      st = (*two)->Push(*wt, t, mine.keys, mine.grads.data());
      HELPER_CHECK("two_phase", st.ok(), st.ToString());
    }
    HELPER_CHECK("two_phase", (*flat)->AdvanceClock(*wf).ok(), "AdvanceClock");
    HELPER_CHECK("two_phase", (*two)->AdvanceClock(*wt).ok(), "AdvanceClock");
  }
  uint64_t rows = 0;
  for (TableId t = 0; t < tables.size(); ++t) {
    const auto want = ShardRows(**flat, t, "two_phase");
    const auto got = ShardRows(**two, t, "two_phase");
    HELPER_CHECK("two_phase", got == want,
                 "table " + std::to_string(t) + ": shard rows differ from flat");
    rows += got.size();
  }
  Result<ClusterStats> fs = (*flat)->SummedStats();
  Result<ClusterStats> ts = (*two)->SummedStats();
  HELPER_CHECK("two_phase", fs.ok() && ts.ok(), "SummedStats");
  HELPER_CHECK("two_phase", fs->exchange.bytes_forwarded == 0, "flat forwarded bytes");
  HELPER_CHECK("two_phase", ts->exchange.bytes_forwarded > 0, "two-phase forwarded nothing");
  HELPER_CHECK("two_phase", ts->exchange.bytes_sent == fs->exchange.bytes_sent,
               "bytes sent differ");
  HELPER_CHECK("two_phase", (*flat)->Close().ok() && (*two)->Close().ok(), "Close");
  Finish(true, "two_phase",
         std::to_string(rows) + " shard rows identical; " +
             std::to_string(ts->exchange.bytes_forwarded) + " bytes forwarded");
}

// A hash of `v`'s bytes, gathered: the same on every rank?
bool SameBytesOnEveryRank(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  std::vector<uint64_t> all(g_world);
  MPI_Allgather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (uint64_t x : all) {
    if (x != all[0]) return false;
  }
  return true;
}

// Rank q's gradient of parameter i at step s (the same function everywhere).
float DenseGrad(int s, int q, size_t i) {
  return std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(q) +
                  0.11f * static_cast<float>(s)) *
         (1.0f + 0.5f * static_cast<float>(q));
}

// Every rank's Adam copy in one process, averaged every k steps: the model.
struct DenseModel {
  std::vector<std::vector<float>> x, v;  // per rank
  float b2_power = 1.0f;
};
void ModelStep(DenseModel& m, const DenseSyncOptions& o, int step) {
  m.b2_power *= o.beta2;
  for (int q = 0; q < g_world; ++q) {
    for (size_t i = 0; i < m.x[q].size(); ++i) {
      const float g = DenseGrad(step, q, i);
      m.v[q][i] = o.beta2 * m.v[q][i] + (1.0f - o.beta2) * g * g;
      m.x[q][i] -= o.learning_rate * g / (std::sqrt(m.v[q][i] / (1.0f - m.b2_power)) + o.epsilon);
    }
  }
  if ((step + 1) % o.merge_every_steps != 0) return;
  for (size_t i = 0; i < m.x[0].size(); ++i) {
    float xs = 0, vs = 0;
    for (int q = 0; q < g_world; ++q) xs += m.x[q][i], vs += m.v[q][i];
    for (int q = 0; q < g_world; ++q) m.x[q][i] = xs / g_world, m.v[q][i] = vs / g_world;
  }
}

// Runs `steps` steps at k; returns the bytes all-reduced.
uint64_t RunDense(uint32_t k, int steps) {
  DenseSyncOptions o;
  o.learning_rate = 0.01f;
  o.merge_every_steps = k;
  Result<std::unique_ptr<DenseSync>> sync = DenseSync::Create(o, MPI_COMM_WORLD);
  HELPER_CHECK("dense_sync", sync.ok(), sync.status().ToString());
  // Two buffers, as a model's layers: 64 weights and 7 biases.
  const std::vector<size_t> sizes = {64, 7};
  std::vector<std::vector<float>> params(sizes.size()), grads(sizes.size());
  DenseModel model;
  model.x.assign(g_world, {});
  model.v.assign(g_world, {});
  size_t base = 0;
  for (size_t b = 0; b < sizes.size(); ++b) {
    for (size_t i = 0; i < sizes[b]; ++i) params[b].push_back(0.01f * static_cast<float>(base + i));
    grads[b].resize(sizes[b]);
    Result<uint32_t> id =
        (*sync)->Register("layer" + std::to_string(b), params[b].data(), grads[b].data(), sizes[b]);
    HELPER_CHECK("dense_sync", id.ok() && *id == b, id.status().ToString());
    for (int q = 0; q < g_world; ++q) {
      model.x[q].insert(model.x[q].end(), params[b].begin(), params[b].end());
      model.v[q].resize(model.x[q].size(), 0.0f);
    }
    base += sizes[b];
  }
  for (int s = 0; s < steps; ++s) {
    size_t at = 0;
    for (size_t b = 0; b < sizes.size(); ++b) {
      for (size_t i = 0; i < sizes[b]; ++i) grads[b][i] = DenseGrad(s, g_rank, at + i);
      at += sizes[b];
    }
    Status st = (*sync)->Step();
    HELPER_CHECK("dense_sync", st.ok(), st.ToString());
    ModelStep(model, o, s);
    std::vector<float> mine;
    for (const auto& p : params) mine.insert(mine.end(), p.begin(), p.end());
    for (size_t i = 0; i < mine.size(); ++i) {
      const float want = model.x[g_rank][i];
      HELPER_CHECK("dense_sync", std::fabs(mine[i] - want) <= 1e-5f * (1.0f + std::fabs(want)),
                   "k " + std::to_string(k) + " step " + std::to_string(s) + " param " +
                       std::to_string(i) + ": " + std::to_string(mine[i]) + " != model " +
                       std::to_string(want));
    }
    const bool merged = (s + 1) % static_cast<int>(k) == 0;
    if (merged) {
      HELPER_CHECK(
          "dense_sync", SameBytesOnEveryRank(mine),
          "k " + std::to_string(k) + " step " + std::to_string(s) + ": ranks differ after a merge");
    } else if (g_world > 1) {
      HELPER_CHECK("dense_sync", !SameBytesOnEveryRank(mine),
                   "k " + std::to_string(k) + " step " + std::to_string(s) +
                       ": ranks equal between merges (nothing local?)");
    }
  }
  const DenseSyncStats stats = (*sync)->Stats();
  HELPER_CHECK("dense_sync", stats.steps == uint64_t(steps), "steps");
  HELPER_CHECK("dense_sync", stats.merges == uint64_t(steps) / k, "merges");
  return stats.bytes_allreduced;
}

// An explicit Merge restarts the count of k: at k = 4, two Steps, a Merge,
// then the fourth Step after it (not the second) merges.
void MergeRestartsK() {
  DenseSyncOptions o;
  o.merge_every_steps = 4;
  Result<std::unique_ptr<DenseSync>> sync = DenseSync::Create(o, MPI_COMM_WORLD);
  HELPER_CHECK("dense_sync", sync.ok(), sync.status().ToString());
  std::vector<float> x(5, 0.5f), g(5, 0.25f);
  HELPER_CHECK("dense_sync", (*sync)->Register("x", x.data(), g.data(), x.size()).ok(), "register");
  auto expect = [&](uint64_t merges, uint64_t unmerged, const char* when) {
    const DenseSyncStats s = (*sync)->Stats();
    HELPER_CHECK("dense_sync", s.merges == merges && s.unmerged_steps == unmerged,
                 std::string(when) + ": " + std::to_string(s.merges) + " merges, " +
                     std::to_string(s.unmerged_steps) + " unmerged steps");
  };
  for (int s = 0; s < 2; ++s) HELPER_CHECK("dense_sync", (*sync)->Step().ok(), "step");
  expect(0, 2, "two steps");
  HELPER_CHECK("dense_sync", (*sync)->Merge().ok(), "merge");
  expect(1, 0, "after Merge");
  for (int s = 0; s < 3; ++s) HELPER_CHECK("dense_sync", (*sync)->Step().ok(), "step");
  expect(1, 3, "three steps after Merge");
  HELPER_CHECK("dense_sync", (*sync)->Step().ok(), "step");
  expect(2, 0, "four steps after Merge");
  HELPER_CHECK("dense_sync", (*sync)->Stats().bytes_allreduced == 2 * 2 * 5 * sizeof(float),
               "bytes after two merges of 5 floats");
}

void DenseSyncScenario() {
  MergeRestartsK();
  const uint64_t every = RunDense(1, 20);
  const uint64_t tenth = RunDense(10, 20);
  HELPER_CHECK("dense_sync", every == 20 * 2 * 71 * sizeof(float), std::to_string(every));
  HELPER_CHECK("dense_sync", tenth * 10 == every,
               std::to_string(tenth) + " bytes at k = 10, " + std::to_string(every) + " at k = 1");
  DenseSyncOptions bad;
  bad.merge_every_steps = 0;
  HELPER_CHECK("dense_sync", DenseSync::Create(bad, MPI_COMM_WORLD).status().IsInvalidArgument(),
               "k = 0 accepted");
  Finish(true, "dense_sync",
         "bytes all-reduced over 20 steps: " + std::to_string(every) + " at k = 1, " +
             std::to_string(tenth) + " at k = 10");
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &strata::g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &strata::g_world);
  if (argc < 3) strata::Finish(false, "usage", "cluster_mpi_helper SCENARIO DIR [ARGS]");
  const std::string scenario = argv[1];
  const std::string dir = argv[2];
  if (scenario == "train" && argc == 4) strata::Train(dir, argv[3]);
  if (scenario == "verify" && argc == 5)
    strata::Verify(dir, std::atoi(argv[3]), std::atoi(argv[4]));
  if (scenario == "pull_push") strata::PullPush(dir);
  if (scenario == "bad_input") strata::BadInput(dir);
  if (scenario == "create") strata::Create(dir);
  if (scenario == "second_open") strata::SecondOpen(dir);
  if (scenario == "stall") strata::Stall(dir);
  if (scenario == "reopen") strata::Reopen(dir);
  if (scenario == "two_phase") strata::TwoPhase(dir);
  if (scenario == "dense_sync") strata::DenseSyncScenario();
  strata::Finish(false, scenario, "unknown scenario");
}
