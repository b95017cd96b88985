// strata-test-labels: integration
// strata-test-timeout: 300
// A child process trains, checkpoints, trains on and is killed (SIGKILL) at a
// random point; reopening the directory gives exactly the checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <unordered_map>

#include "strata/store.h"

namespace strata {
namespace {

constexpr uint32_t kDim = 2;

std::vector<TableOptions> Tables() {
  std::vector<TableOptions> tables(2);
  for (int i = 0; i < 2; ++i) {
    tables[i].name = "crash" + std::to_string(i);
    tables[i].dim = kDim;
    tables[i].optimizer.kind = Optimizer::kSgd;
    tables[i].optimizer.learning_rate = -1.0f;  // each push of gradient 1 adds 1
    tables[i].initializer = Initializer::kZeros;
  }
  return tables;
}

StoreOptions Options(const std::string& dir) {
  StoreOptions o;
  o.dir = dir;
  o.device_rows_max = 2 * 64;
  o.dram_rows_max = 96;
  o.use_gpu = false;
  return o;
}

struct Step {
  TableId table;
  std::vector<Key> keys;
};

std::vector<Step> Plan(uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  std::vector<Step> plan;
  for (int s = 0; s < steps; ++s) {
    Step step{static_cast<TableId>(rng() % 2), std::vector<Key>(1 + rng() % 20)};
    for (auto& k : step.keys) k = rng() % 500;
    plan.push_back(std::move(step));
  }
  return plan;
}

// Runs in the child: never returns.
[[noreturn]] void Child(const std::string& dir, const std::vector<Step>& plan, int checkpoint_at,
                        int kill_at) {
  auto opened = Store::Open(Options(dir), Tables());
  if (!opened.ok()) _exit(2);
  auto store = std::move(opened).value();
  WorkerId w = *store->RegisterWorker();
  for (int s = 0; s < static_cast<int>(plan.size()); ++s) {
    if (s == kill_at) kill(getpid(), SIGKILL);
    if (s == checkpoint_at && !store->Checkpoint().ok()) _exit(3);
    const Step& step = plan[s];
    std::vector<float> out(step.keys.size() * kDim), grads(step.keys.size() * kDim, 1.0f);
    if (!store->Pull(w, step.table, step.keys, out.data()).ok()) _exit(4);
    if (!store->Push(w, step.table, step.keys, grads.data()).ok()) _exit(5);
    if (!store->AdvanceClock(w).ok()) _exit(6);
  }
  kill(getpid(), SIGKILL);
  _exit(7);
}

// The child's body, run in a fresh process (fork then exec of this binary:
// a store's thread pools make fork alone unsafe). Skipped unless the parent
// set STRATA_CRASH_CHILD="dir seed checkpoint_at kill_at".
TEST(StoreCrashTest, ChildBody) {
  const char* spec = std::getenv("STRATA_CRASH_CHILD");
  if (spec == nullptr) GTEST_SKIP() << "runs only as the crash test's child process";
  char dir[4096];
  unsigned long long seed = 0;
  int checkpoint_at = 0, kill_at = 0;
  if (std::sscanf(spec, "%4095s %llu %d %d", dir, &seed, &checkpoint_at, &kill_at) != 4) _exit(9);
  Child(dir, Plan(seed, 120), checkpoint_at, kill_at);
}

TEST(StoreCrashTest, KilledAfterCheckpointReopensAtCheckpoint) {
  std::random_device rd;
  for (int trial = 0; trial < 3; ++trial) {
    const uint64_t seed = rd();
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const int steps = 120;
    const int checkpoint_at = 20 + rng() % 60;
    const int kill_at = checkpoint_at + 1 + rng() % (steps - checkpoint_at);  // after the checkpoint
    auto plan = Plan(seed, steps);
    std::string dir = (std::filesystem::temp_directory_path() /
                       ("strata_crash_test_" + std::to_string(getpid()) + "_" +
                        std::to_string(trial)))
                          .string();
    std::filesystem::remove_all(dir);

    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::string spec = dir + " " + std::to_string(seed) + " " + std::to_string(checkpoint_at) +
                         " " + std::to_string(kill_at);
      setenv("STRATA_CRASH_CHILD", spec.c_str(), 1);
      execl("/proc/self/exe", "store_crash_child", "--gtest_filter=StoreCrashTest.ChildBody",
            static_cast<char*>(nullptr));
      _exit(8);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "child exited with " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);

    std::vector<std::unordered_map<Key, int64_t>> expected(2);
    for (int s = 0; s < checkpoint_at; ++s) {
      for (Key k : plan[s].keys) expected[plan[s].table][k]++;
    }
    auto store = std::move(Store::Open(Options(dir), Tables())).value();
    WorkerId w = *store->RegisterWorker();
    EXPECT_EQ(*store->CurrentClock(w), checkpoint_at);
    for (TableId t = 0; t < 2; ++t) {
      std::vector<Key> keys;
      for (Key k = 0; k < 500; ++k) keys.push_back(k);
      std::vector<float> out(keys.size() * kDim);
      ASSERT_TRUE(store->Pull(w, t, keys, out.data()).ok());
      for (Key k = 0; k < 500; ++k) {
        float want = expected[t].count(k) ? float(expected[t][k]) : 0.0f;
        ASSERT_EQ(out[k * kDim], want) << "table " << t << " key " << k;
        ASSERT_EQ(out[k * kDim + 1], want) << "table " << t << " key " << k;
      }
    }
    ASSERT_TRUE(store->Close().ok());
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace strata
