// strata-test-labels: unit gpu
// strata-test-timeout: 120
// The NCCL form of strata::Cluster (docs/cluster.md, "The NCCL form") at world
// size 1 on one GPU, with an ncclComm_t the test makes itself
// (ncclGetUniqueId, ncclCommInitRank(..., 1, id, 0)) and no MPI call at all:
// Pull and Push with device buffers on a stream of the test's against a Store
// with T0 on the GPU given the same calls (bit for bit; gradients are
// multiples of 1/16, so their sums are exact in any order) and against a
// host model of SGD; keys in host and in device memory; Intent and
// AdvanceClock; Checkpoint and reopen; bad input refused with a clear error;
// the exchange counters. The NCCL form runs its whole exchange at one rank
// too (grouped ncclSend/ncclRecv to itself, the kernels that sum duplicates
// and scatter rows), so this checks the data path; more ranks need one GPU
// each. Skips without a GPU or in a build without NCCL or MPI.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/hash.h"
#include "strata/types.h"
#include "tests/util/scratch_dir.h"

#if STRATA_HAVE_MPI && STRATA_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "cluster/nccl_comm.h"
#include "strata/cluster.h"
#include "strata/store.h"

namespace strata {
namespace {

// Every CUDA and NCCL call of the test is checked.
#define CUDA_OK(call)                                                        \
  do {                                                                       \
    const cudaError_t rc_ = (call);                                          \
    ASSERT_EQ(rc_, cudaSuccess) << #call << ": " << cudaGetErrorString(rc_); \
  } while (0)
#define NCCL_OK(call)                                                        \
  do {                                                                       \
    const ncclResult_t rc_ = (call);                                         \
    ASSERT_EQ(rc_, ncclSuccess) << #call << ": " << ncclGetErrorString(rc_); \
  } while (0)

std::vector<TableOptions> Tables() {
  TableOptions a;
  a.name = "a";
  a.dim = 8;
  a.optimizer.kind = Optimizer::kAdagrad;
  a.optimizer.learning_rate = 0.25f;
  TableOptions b;
  b.name = "b";
  b.dim = 4;
  b.optimizer.kind = Optimizer::kSgd;
  b.optimizer.learning_rate = 0.5f;
  return {a, b};
}

StoreOptions SmallStore(const std::string& dir) {
  StoreOptions o;
  o.dir = dir;
  // A small T0: rows move between T0 and T1 during the test.
  o.device_rows_max = 256;
  o.dram_rows_max = 4096;
  o.use_gpu = true;
  o.planner_round_us = 100;
  return o;
}

ClusterOptions NcclOptions(const std::string& dir) {
  ClusterOptions o;
  o.store = SmallStore(dir);
  o.collective_timeout_ms = 60'000;
  return o;
}

// Step s's batch of table t: keys from a small range (duplicates), the
// extremes now and then; gradients multiples of 1/16.
struct Batch {
  std::vector<Key> keys;
  std::vector<float> grads;
};
Batch MakeBatch(int step, TableId t, uint32_t dim) {
  SplitMix64 rng(uint64_t(step) * 1000003 + t);
  Batch b;
  const int n = 40 + static_cast<int>(rng.Next() % 40);
  for (int i = 0; i < n; ++i) b.keys.push_back(rng.Next() % 300);
  if (step % 3 == 0) b.keys.push_back(kKeyMax);
  if (step % 4 == 1) b.keys.push_back(0);
  b.keys.push_back(b.keys.front());  // at least one duplicate
  for (size_t i = 0; i < b.keys.size() * dim; ++i) {
    b.grads.push_back(static_cast<float>(static_cast<int>(rng.Next() % 33) - 16) / 16.0f);
  }
  return b;
}

// A device buffer of floats, freed at the end.
class DeviceFloats {
 public:
  explicit DeviceFloats(size_t n) : n_(n) {
    if (n_ > 0) ok_ = cudaMalloc(&data_, n_ * sizeof(float)) == cudaSuccess;
  }
  ~DeviceFloats() {
    if (data_ != nullptr) (void)cudaFree(data_);
  }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  bool ok() const { return ok_; }
  float* get() const { return static_cast<float*>(data_); }

 private:
  size_t n_;
  void* data_ = nullptr;
  bool ok_ = true;
};

class ClusterNcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int gpus = 0;
    const cudaError_t rc = cudaGetDeviceCount(&gpus);
    if (rc != cudaSuccess || gpus == 0) {
      (void)cudaGetLastError();
      GTEST_SKIP() << "no CUDA device visible ("
                   << (rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices") << ")";
    }
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ncclUniqueId id;
    NCCL_OK(ncclGetUniqueId(&id));
    NCCL_OK(ncclCommInitRank(&nccl_, 1, id, 0));
  }
  void TearDown() override {
    if (nccl_ != nullptr) {
      EXPECT_EQ(ncclCommDestroy(nccl_), ncclSuccess);
    }
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    }
  }

  std::unique_ptr<Cluster> OpenCluster(const ClusterOptions& options) {
    Result<std::unique_ptr<Cluster>> c = Cluster::Open(options, Tables(), nccl_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  // `keys`' rows through the cluster (device out on stream_), to the host.
  void ClusterPull(Cluster& c, WorkerId w, TableId t, std::span<const Key> keys,
                   std::vector<float>* rows) {
    PullToHost(t, keys.size(), rows, [&](float* out) { return c.Pull(w, t, keys, out, stream_); });
  }
  // The same through a Store with T0 on the GPU.
  void StorePull(Store& store, WorkerId w, TableId t, std::span<const Key> keys,
                 std::vector<float>* rows) {
    PullToHost(t, keys.size(), rows,
               [&](float* out) { return store.Pull(w, t, keys, out, stream_); });
  }
  // `pull` into a device buffer of `n` rows of table t, copied to *rows.
  template <typename PullFn>
  void PullToHost(TableId t, size_t n, std::vector<float>* rows, PullFn pull) {
    const uint32_t dim = Tables()[t].dim;
    DeviceFloats out(n * dim);
    ASSERT_TRUE(out.ok());
    const Status s = pull(out.get());
    ASSERT_TRUE(s.ok()) << s.ToString();
    rows->assign(n * dim, 0.0f);
    CUDA_OK(cudaMemcpyAsync(rows->data(), out.get(), rows->size() * sizeof(float),
                            cudaMemcpyDeviceToHost, stream_));
    CUDA_OK(cudaStreamSynchronize(stream_));
  }
  // Gradients uploaded, then pushed by `push` (a Cluster or Store call).
  template <typename PushFn>
  void PushFromDevice(const std::vector<float>& grads, PushFn push) {
    DeviceFloats g(grads.size());
    ASSERT_TRUE(g.ok());
    CUDA_OK(cudaMemcpyAsync(g.get(), grads.data(), grads.size() * sizeof(float),
                            cudaMemcpyHostToDevice, stream_));
    const Status s = push(g.get());
    ASSERT_TRUE(s.ok()) << s.ToString();
    CUDA_OK(cudaStreamSynchronize(stream_));
  }

  // `steps` steps of Pull (compared), Push and AdvanceClock on both, from `from`.
  void RunSteps(Cluster& c, WorkerId cw, Store& store, WorkerId sw, int from, int steps) {
    for (int s = from; s < from + steps; ++s) {
      for (TableId t = 0; t < 2; ++t) {
        const Batch b = MakeBatch(s, t, Tables()[t].dim);
        std::vector<float> got, want;
        ASSERT_NO_FATAL_FAILURE(ClusterPull(c, cw, t, b.keys, &got));
        ASSERT_NO_FATAL_FAILURE(StorePull(store, sw, t, b.keys, &want));
        ASSERT_EQ(got.size(), want.size());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "step " << s << " table " << t << ": the cluster's rows differ from the Store's";
        ASSERT_NO_FATAL_FAILURE(PushFromDevice(
            b.grads, [&](const float* g) { return c.Push(cw, t, b.keys, g, stream_); }));
        ASSERT_NO_FATAL_FAILURE(PushFromDevice(
            b.grads, [&](const float* g) { return store.Push(sw, t, b.keys, g, stream_); }));
      }
      ASSERT_TRUE(c.AdvanceClock(cw).ok());
      ASSERT_TRUE(store.AdvanceClock(sw).ok());
    }
  }

  cudaStream_t stream_ = nullptr;
  ncclComm_t nccl_ = nullptr;
};

TEST_F(ClusterNcclTest, PullPushMatchStoreWithT0OnGpu) {
  testing::ScratchDir dir;
  std::unique_ptr<Cluster> c = OpenCluster(NcclOptions(dir.File("cluster")));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->world_size(), 1);
  EXPECT_TRUE(c->Stats().store.t0_on_gpu);
  Result<std::unique_ptr<Store>> store = Store::Open(SmallStore(dir.File("store")), Tables());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->Stats().t0_on_gpu);
  Result<WorkerId> cw = c->RegisterWorker();
  Result<WorkerId> sw = (*store)->RegisterWorker(0);
  ASSERT_TRUE(cw.ok() && sw.ok());
  ASSERT_NO_FATAL_FAILURE(RunSteps(*c, *cw, **store, *sw, 0, 6));
  // Keys in device memory give the same rows as the same keys on the host.
  const Batch b = MakeBatch(100, 0, 8);
  Key* device_keys = nullptr;
  CUDA_OK(cudaMalloc(&device_keys, b.keys.size() * sizeof(Key)));
  CUDA_OK(
      cudaMemcpy(device_keys, b.keys.data(), b.keys.size() * sizeof(Key), cudaMemcpyHostToDevice));
  std::vector<float> from_device, from_host;
  ClusterPull(*c, *cw, 0, std::span<const Key>(device_keys, b.keys.size()), &from_device);
  ClusterPull(*c, *cw, 0, b.keys, &from_host);
  CUDA_OK(cudaFree(device_keys));
  EXPECT_EQ(from_device, from_host);
  EXPECT_TRUE(c->Close().ok());
  EXPECT_TRUE((*store)->Close().ok());
}

TEST_F(ClusterNcclTest, DuplicatesAndSgdMatchAHostModel) {
  testing::ScratchDir dir;
  std::unique_ptr<Cluster> c = OpenCluster(NcclOptions(dir.File("cluster")));
  ASSERT_NE(c, nullptr);
  Result<WorkerId> w = c->RegisterWorker();
  ASSERT_TRUE(w.ok());
  const TableId t = 1;  // SGD, lr 0.5, dim 4
  const uint32_t dim = 4;
  const std::vector<Key> keys = {7, 3, 7, kKeyMax, 0, 3, 7, 12};
  std::vector<float> before;
  ASSERT_NO_FATAL_FAILURE(ClusterPull(*c, *w, t, keys, &before));
  // Duplicates get the same row; a zero row would mean a missing initializer.
  std::map<Key, std::vector<float>> model;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<float> row(before.begin() + i * dim, before.begin() + (i + 1) * dim);
    if (model.count(keys[i]) != 0) {
      EXPECT_EQ(model[keys[i]], row) << "key " << keys[i];
    }
    model[keys[i]] = row;
    bool all_zero = true;
    for (float v : row) all_zero &= v == 0.0f;
    EXPECT_FALSE(all_zero) << "key " << keys[i] << " was not initialized (uniform)";
  }
  // SGD: row -= lr * (sum of the key's gradients in the batch).
  std::vector<float> grads(keys.size() * dim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = static_cast<float>(i % 7) / 16.0f - 0.125f;
  std::map<Key, std::vector<float>> sums;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<float>& sum = sums[keys[i]];
    sum.resize(dim, 0.0f);
    for (uint32_t d = 0; d < dim; ++d) sum[d] += grads[i * dim + d];
  }
  ASSERT_NO_FATAL_FAILURE(
      PushFromDevice(grads, [&](const float* g) { return c->Push(*w, t, keys, g, stream_); }));
  std::vector<float> after;
  ASSERT_NO_FATAL_FAILURE(ClusterPull(*c, *w, t, keys, &after));
  for (size_t i = 0; i < keys.size(); ++i) {
    for (uint32_t d = 0; d < dim; ++d) {
      const float want = model[keys[i]][d] - 0.5f * sums[keys[i]][d];
      EXPECT_NEAR(after[i * dim + d], want, 1e-6f) << "key " << keys[i] << " float " << d;
    }
  }
  // An empty batch is a no-op, with null buffers.
  EXPECT_TRUE(c->Pull(*w, t, {}, nullptr, stream_).ok());
  EXPECT_TRUE(c->Push(*w, t, {}, nullptr, stream_).ok());
}

TEST_F(ClusterNcclTest, IntentAndAdvanceClock) {
  testing::ScratchDir dir;
  std::unique_ptr<Cluster> c = OpenCluster(NcclOptions(dir.File("cluster")));
  ASSERT_NE(c, nullptr);
  Result<WorkerId> w = c->RegisterWorker();
  ASSERT_TRUE(w.ok());
  const std::vector<Key> keys = {1000, 1001, 1002, 1003, 1004};
  ASSERT_TRUE(c->Intent(*w, 0, keys, 1, 2).ok());
  ASSERT_TRUE(c->Intent(*w, 1, keys, 1, 3).ok());
  EXPECT_TRUE(c->Intent(*w, 0, keys, 2, 2).IsInvalidArgument());  // an empty window
  const uint64_t intents_before = c->Stats().store.intents;
  ASSERT_TRUE(c->AdvanceClock(*w).ok());
  ASSERT_TRUE(c->DrainIntents().ok());
  Result<Clock> clock = c->CurrentClock(*w);
  ASSERT_TRUE(clock.ok());
  EXPECT_EQ(*clock, 1);
  // Both intents' keys reached the shard's Store (delivered through NCCL).
  EXPECT_EQ(c->Stats().store.intents, intents_before + 2 * keys.size());
  std::vector<float> rows;
  ASSERT_NO_FATAL_FAILURE(ClusterPull(*c, *w, 0, keys, &rows));
  ASSERT_TRUE(c->AdvanceClock(*w).ok());
  EXPECT_EQ(*c->CurrentClock(*w), 2);
  EXPECT_TRUE(c->AdvanceClock(*w + 1).IsInvalidArgument());
}

TEST_F(ClusterNcclTest, CheckpointAndReopen) {
  testing::ScratchDir dir;
  const ClusterOptions options = NcclOptions(dir.File("cluster"));
  const Batch b = MakeBatch(7, 0, 8);
  std::vector<float> saved;
  {
    std::unique_ptr<Cluster> c = OpenCluster(options);
    ASSERT_NE(c, nullptr);
    Result<WorkerId> w = c->RegisterWorker();
    ASSERT_TRUE(w.ok());
    ASSERT_NO_FATAL_FAILURE(PushFromDevice(
        b.grads, [&](const float* g) { return c->Push(*w, 0, b.keys, g, stream_); }));
    ASSERT_TRUE(c->AdvanceClock(*w).ok());
    ASSERT_TRUE(c->AdvanceClock(*w).ok());
    ASSERT_TRUE(c->Checkpoint().ok());
    ASSERT_NO_FATAL_FAILURE(ClusterPull(*c, *w, 0, b.keys, &saved));
    ASSERT_TRUE(c->Close().ok());
    EXPECT_TRUE(c->Pull(*w, 0, b.keys, nullptr, stream_).IsFailedPrecondition());
  }
  std::unique_ptr<Cluster> c = OpenCluster(options);
  ASSERT_NE(c, nullptr);
  Result<WorkerId> w = c->RegisterWorker();
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*c->CurrentClock(*w), 2);
  std::vector<float> got;
  ASSERT_NO_FATAL_FAILURE(ClusterPull(*c, *w, 0, b.keys, &got));
  EXPECT_EQ(got, saved);
}

TEST_F(ClusterNcclTest, BadInputRefusedWithAClearError) {
  testing::ScratchDir dir;
  std::unique_ptr<Cluster> c = OpenCluster(NcclOptions(dir.File("cluster")));
  ASSERT_NE(c, nullptr);
  Result<WorkerId> w = c->RegisterWorker();
  ASSERT_TRUE(w.ok());
  const std::vector<Key> keys = {1, 2, 3};
  DeviceFloats out(keys.size() * 8);
  ASSERT_TRUE(out.ok());
  Status s = c->Pull(*w, 7, keys, out.get(), stream_);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("table 7 does not exist"), std::string::npos) << s.ToString();
  s = c->Push(*w, 7, keys, out.get(), stream_);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  s = c->Pull(*w + 3, 0, keys, out.get(), stream_);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.message().find("worker"), std::string::npos) << s.ToString();
  s = c->Pull(*w, 0, keys, nullptr, stream_);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  // The refusals changed nothing and the cluster goes on.
  std::vector<float> rows;
  ASSERT_NO_FATAL_FAILURE(ClusterPull(*c, *w, 0, keys, &rows));
  EXPECT_EQ(c->Stats().exchange.pull_calls, 1u);
  EXPECT_EQ(c->Stats().exchange.push_calls, 0u);
  // A two-phase exchange is the MPI form's: refused at Open.
  ClusterOptions two_phase = NcclOptions(dir.File("two-phase"));
  two_phase.exchange = ClusterExchange::kTwoPhase;
  two_phase.topology = "seed8";
  Result<std::unique_ptr<Cluster>> refused = Cluster::Open(two_phase, Tables(), nccl_);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsInvalidArgument()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("two-phase"), std::string::npos);
  // A null communicator.
  refused = Cluster::Open(NcclOptions(dir.File("null")), Tables(), ncclComm_t{nullptr});
  EXPECT_TRUE(refused.status().IsInvalidArgument()) << refused.status().ToString();
}

TEST_F(ClusterNcclTest, ExchangeCounters) {
  testing::ScratchDir dir;
  std::unique_ptr<Cluster> c = OpenCluster(NcclOptions(dir.File("cluster")));
  ASSERT_NE(c, nullptr);
  Result<WorkerId> w = c->RegisterWorker();
  ASSERT_TRUE(w.ok());
  uint64_t distinct = 0;
  for (int s = 0; s < 3; ++s) {
    const Batch b = MakeBatch(s, 1, 4);
    distinct += std::set<Key>(b.keys.begin(), b.keys.end()).size();
    std::vector<float> rows;
    ASSERT_NO_FATAL_FAILURE(ClusterPull(*c, *w, 1, b.keys, &rows));
    ASSERT_NO_FATAL_FAILURE(PushFromDevice(
        b.grads, [&](const float* g) { return c->Push(*w, 1, b.keys, g, stream_); }));
  }
  ASSERT_TRUE(c->Intent(*w, 1, std::vector<Key>{1, 2}, 1, 2).ok());
  ASSERT_TRUE(c->AdvanceClock(*w).ok());
  const ClusterStats mine = c->Stats();
  EXPECT_EQ(mine.exchange.pull_calls, 3u);
  EXPECT_EQ(mine.exchange.push_calls, 3u);
  // One rank: nothing goes to another rank.
  EXPECT_EQ(mine.exchange.keys_sent, 0u);
  EXPECT_EQ(mine.exchange.keys_served, 0u);
  EXPECT_EQ(mine.exchange.bytes_sent, 0u);
  EXPECT_EQ(mine.exchange.bytes_received, 0u);
  EXPECT_EQ(mine.exchange.intents_sent, 0u);
  EXPECT_EQ(mine.exchange.bytes_forwarded, 0u);
  // The shard was asked for each batch's distinct keys, once each.
  EXPECT_EQ(mine.store.pulls, distinct);
  EXPECT_EQ(mine.store.pushes, distinct);
  // Summed over one rank (an ncclAllReduce): the same counters.
  Result<ClusterStats> summed = c->SummedStats();
  ASSERT_TRUE(summed.ok()) << summed.status().ToString();
  EXPECT_EQ(summed->exchange.pull_calls, 3u);
  EXPECT_EQ(summed->exchange.push_calls, 3u);
  EXPECT_EQ(summed->store.pulls, mine.store.pulls);
  EXPECT_EQ(summed->store.pushes, mine.store.pushes);
  EXPECT_EQ(summed->store.intents, mine.store.intents);
  // AgreeOn names rank 0 in a failure, and passes an OK through.
  EXPECT_TRUE(c->AgreeOn(Status::Ok()).ok());
  const Status agreed = c->AgreeOn(Status::NotFound("file x"));
  EXPECT_TRUE(agreed.IsNotFound());
  EXPECT_EQ(agreed.message(), "rank 0: file x");
}

// A collective that cannot complete (a receive from itself with no send)
// fails with Unavailable and leaves the communicator unusable: run in a
// child process (HungCollectiveTimesOutAndAborts), so that a hang cannot
// outlive the test. Skips unless that test started it. NCCL may refuse the
// exchange at once (2.28 on an H200, 2026-11-26: "invalid usage: Trying to
// recv to self without a matching send") or let it hang until the
// communicator's timeout aborts it; either way the call must fail as
// Unavailable and every later call too, and a timeout must not come early.
constexpr char kTimeoutChildEnv[] = "STRATA_NCCL_TIMEOUT_CHILD";

TEST(ClusterNcclTimeoutChild, Body) {
  const char* done_file = std::getenv(kTimeoutChildEnv);
  if (done_file == nullptr) GTEST_SKIP() << "run by HungCollectiveTimesOutAndAborts";
  CUDA_OK(cudaSetDevice(0));
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  ncclComm_t parent = nullptr;
  NCCL_OK(ncclCommInitRank(&parent, 1, id, 0));
  Result<std::unique_ptr<cluster::NcclComm>> comm = cluster::NcclComm::Split(parent, 500);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  DeviceFloats buffer(16);
  ASSERT_TRUE(buffer.ok());
  const std::vector<int> send_counts = {0};
  const std::vector<int> recv_counts = {4};
  const auto start = std::chrono::steady_clock::now();
  Status s =
      (*comm)->AllToAllv(buffer.get(), send_counts, buffer.get(), recv_counts, 4 * sizeof(float));
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_NE(s.message().find("unusable"), std::string::npos) << s.ToString();
  if (s.message().find("did not complete within 500 ms") != std::string::npos) {
    EXPECT_GE(waited, std::chrono::milliseconds(500));
  }
  // Unusable from here on, without another NCCL call.
  uint64_t one = 1;
  uint64_t sum = 0;
  s = (*comm)->AllReduceSum(&one, &sum, 1);
  EXPECT_TRUE(s.IsUnavailable()) << s.ToString();
  EXPECT_TRUE((*comm)->AgreeOn(Status::Ok()).IsUnavailable());
  comm->reset();
  (void)ncclCommAbort(parent);
  if (!::testing::Test::HasFailure()) std::ofstream(done_file) << "ok\n";
}

TEST_F(ClusterNcclTest, HungCollectiveTimesOutAndAborts) {
  testing::ScratchDir dir;
  const std::string done_file = dir.File("done");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // exec at once: the child starts CUDA afresh
    setenv(kTimeoutChildEnv, done_file.c_str(), 1);
    execl("/proc/self/exe", "nccl_timeout_child", "--gtest_filter=ClusterNcclTimeoutChild.Body",
          static_cast<char*>(nullptr));
    _exit(8);
  }
  // The child's own bound is 500 ms; a hang past a minute is a failure.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  pid_t got = 0;
  while ((got = waitpid(pid, &status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (got == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the hung collective was not aborted within 60 s";
  }
  ASSERT_EQ(got, pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child: " << (WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  std::string text;
  std::ifstream(done_file) >> text;
  EXPECT_EQ(text, "ok") << "the child did not run its checks to the end";
}

}  // namespace
}  // namespace strata

#else  // no NCCL or no MPI

TEST(ClusterNcclTest, NeedsNcclAndMpi) {
  GTEST_SKIP() << "the NCCL form needs a build with NCCL (CUDA) and MPI (the Cluster)";
}

#endif
