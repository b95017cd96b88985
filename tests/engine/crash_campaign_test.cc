// strata-test-labels: integration
// strata-test-timeout: 1500
// The crash campaign: a Store trains through all three tiers (crash_workload.h)
// and dies at a random point; reopening must give exactly the rows and clock
// of a checkpoint that may have become durable: the last one that returned OK,
// or the one in flight when it died.
//
// Kill variant: a child process (this binary, re-executed) is killed with
// SIGKILL at a random file-system call of the SSD tier (native backend:
// io::FaultEnv, FaultKind::kKill) or after a random time (both backends), so
// kills land inside checkpoints, T1 write-back and cleaning, pulls and pushes.
// Power-loss variant (native backend, in-process): from a random I/O call on,
// every call of the SSD tier fails, then every write not made durable by an
// fsync (data, MANIFEST, renames whose directory was not fsynced) is dropped.
//
// STRATA_CRASH_TRIALS sets the trials per test (default 20; `make crash` runs
// 200); STRATA_CRASH_SEED replays a campaign (the seed is printed).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "engine/store_impl.h"
#include "io/fault_env.h"
#include "tests/engine/crash_workload.h"

namespace strata::crash {
namespace {

constexpr char kChildEnv[] = "STRATA_CRASH_CHILD";

uint64_t EnvNumber(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  return text == nullptr ? fallback : std::strtoull(text, nullptr, 10);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string BackendName(SsdBackend backend) {
  return backend == SsdBackend::kNative ? "native" : "rocksdb";
}

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = ::testing::TempDir() + "strata_crash_XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : "";
    EXPECT_FALSE(path_.empty()) << "mkdtemp " << tmpl;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// How a child dies: at its nth SSD file-system call, or after some time.
enum class KillAt { kIoCall, kTime };

// Runs in the child process: never returns.
[[noreturn]] void ChildMain(const std::string& dir, SsdBackend backend, uint64_t seed,
                            KillAt kill_at, uint64_t param, const std::string& progress_path) {
  io::FaultEnv env(io::Env::Default());
  engine::SsdEnvs envs;
  if (kill_at == KillAt::kIoCall) {
    if (!env.AddRule({.op = io::FaultOp::kAny, .nth_call = param, .kind = io::FaultKind::kKill})
             .ok()) {
      _exit(3);
    }
    envs.env = &env;
  } else {
    std::thread([param] {
      std::this_thread::sleep_for(std::chrono::microseconds(param));  // the fault, not a sync
      ::kill(::getpid(), SIGKILL);
    }).detach();
  }
  Progress progress(progress_path);
  auto store = engine::StoreImpl::Open(Options(dir, backend), Tables(), envs);
  if (!store.ok()) {
    std::fprintf(stderr, "child: open: %s\n", store.status().ToString().c_str());
    _exit(4);
  }
  Status s = RunWorkload(**store, Plan(seed), &progress);
  if (!s.ok()) {
    std::fprintf(stderr, "child: workload: %s\n", s.ToString().c_str());
    _exit(5);
  }
  ::kill(::getpid(), SIGKILL);  // survived the plan: die at its end
  _exit(6);
}

TEST(CrashCampaignTest, ChildBody) {
  const char* spec = std::getenv(kChildEnv);
  if (spec == nullptr) GTEST_SKIP() << "runs only as the crash campaign's child process";
  std::istringstream in(spec);
  std::string dir, progress;
  int backend = 0, kill_at = 0;
  uint64_t seed = 0, param = 0;
  if (!(in >> dir >> backend >> seed >> kill_at >> param >> progress)) _exit(9);
  ChildMain(dir, static_cast<SsdBackend>(backend), seed, static_cast<KillAt>(kill_at), param,
            progress);
}

// One in-process run of the plan, for calibration: its SSD file-system
// calls (native backend only) and its duration.
struct Calibration {
  uint64_t io_calls = 0;
  uint64_t run_us = 0;
};

Calibration Calibrate(SsdBackend backend) {
  ScratchDir scratch;
  io::FaultEnv env(io::Env::Default());
  engine::SsdEnvs envs;
  if (backend == SsdBackend::kNative) {
    EXPECT_TRUE(
        env.AddRule({.op = io::FaultOp::kAny, .nth_call = std::numeric_limits<uint64_t>::max()})
            .ok());
    envs.env = &env;
  }
  const auto start = std::chrono::steady_clock::now();
  {
    auto store =
        engine::StoreImpl::Open(Options(scratch.path() + "/store", backend), Tables(), envs);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return {};
    Progress none("");
    Status s = RunWorkload(**store, Plan(1), &none);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  Calibration c;
  c.io_calls = env.calls_seen();
  c.run_us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::steady_clock::now() - start)
                                       .count());
  return c;
}

struct Campaign {
  uint64_t seed;
  uint64_t trials;
  std::map<char, int> last_steps;  // where the runs died: C checkpoint, P pull, U push, ...
};

Campaign StartCampaign(const char* name) {
  Campaign c;
  c.seed = EnvNumber("STRATA_CRASH_SEED", std::random_device{}());
  c.trials = EnvNumber("STRATA_CRASH_TRIALS", 20);
  std::printf("%s: %llu trials, seed %llu (replay: STRATA_CRASH_SEED=%llu)\n", name,
              static_cast<unsigned long long>(c.trials), static_cast<unsigned long long>(c.seed),
              static_cast<unsigned long long>(c.seed));
  return c;
}

void PrintSteps(const Campaign& c) {
  std::printf("died in:");
  for (const auto& [step, count] : c.last_steps) {
    const char* name = step == 'C'   ? "checkpoint"
                       : step == 'D' ? "after-checkpoint"
                       : step == 'P' ? "pull"
                       : step == 'U' ? "push"
                       : step == 'I' ? "intent"
                                     : "open";
    std::printf(" %s %d", name, count);
  }
  std::printf("\n");
}

void KillCampaign(SsdBackend backend) {
  Campaign campaign = StartCampaign(("kill, " + BackendName(backend)).c_str());
  const Calibration cal = Calibrate(backend);
  ASSERT_GT(cal.run_us, 0u);
  std::printf("calibration: %llu SSD calls, %llu us per run\n",
              static_cast<unsigned long long>(cal.io_calls),
              static_cast<unsigned long long>(cal.run_us));
  std::mt19937_64 rng(campaign.seed);
  for (uint64_t trial = 0; trial < campaign.trials; ++trial) {
    const uint64_t seed = rng();
    const KillAt kill_at =
        backend == SsdBackend::kNative && trial % 2 == 0 ? KillAt::kIoCall : KillAt::kTime;
    const uint64_t param = kill_at == KillAt::kIoCall
                               ? 1 + rng() % std::max<uint64_t>(1, cal.io_calls)
                               : rng() % (cal.run_us + 1);
    SCOPED_TRACE("trial " + std::to_string(trial) + " seed " + std::to_string(seed) + " kill at " +
                 (kill_at == KillAt::kIoCall ? "I/O call " : "us ") + std::to_string(param));
    ScratchDir scratch;
    const std::string dir = scratch.path() + "/store";
    const std::string progress = scratch.path() + "/progress";
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string spec =
          dir + " " + std::to_string(static_cast<int>(backend)) + " " + std::to_string(seed) + " " +
          std::to_string(static_cast<int>(kill_at)) + " " + std::to_string(param) + " " + progress;
      setenv(kChildEnv, spec.c_str(), 1);
      const int null_fd = ::open("/dev/null", O_WRONLY);  // gtest's chatter; errors stay on stderr
      if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
      execl("/proc/self/exe", "crash_child", "--gtest_filter=CrashCampaignTest.ChildBody",
            static_cast<char*>(nullptr));
      _exit(8);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "child exited with " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    const Outcome outcome = ReadProgress(ReadFile(progress));
    campaign.last_steps[outcome.last_step]++;
    std::vector<int64_t> allowed = {outcome.last_done};
    if (outcome.in_flight >= 0) allowed.push_back(outcome.in_flight);
    auto store = Store::Open(Options(dir, backend), Tables());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ExpectCheckpoint(**store, Plan(seed), allowed);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ASSERT_TRUE((*store)->Close().ok());
  }
  PrintSteps(campaign);
  if (campaign.trials >= 100) {  // the long form must have hit each phase
    for (char step : {'C', 'P', 'U'}) EXPECT_GT(campaign.last_steps[step], 0) << step;
  }
}

TEST(CrashCampaignTest, KillNative) { KillCampaign(SsdBackend::kNative); }
TEST(CrashCampaignTest, KillRocksDb) { KillCampaign(SsdBackend::kRocksDb); }

TEST(CrashCampaignTest, PowerLossNative) {
  Campaign campaign = StartCampaign("power loss, native");
  const Calibration cal = Calibrate(SsdBackend::kNative);
  ASSERT_GT(cal.io_calls, 0u);
  std::mt19937_64 rng(campaign.seed);
  for (uint64_t trial = 0; trial < campaign.trials; ++trial) {
    const uint64_t seed = rng();
    const uint64_t cut = 1 + rng() % cal.io_calls;
    SCOPED_TRACE("trial " + std::to_string(trial) + " seed " + std::to_string(seed) +
                 " power cut at I/O call " + std::to_string(cut));
    ScratchDir scratch;
    const std::string dir = scratch.path() + "/store";
    const std::string progress_path = scratch.path() + "/progress";
    io::FaultEnv env(io::Env::Default());
    ASSERT_TRUE(env.AddRule({.op = io::FaultOp::kAny, .nth_call = cut}).ok());
    {
      Progress progress(progress_path);
      auto store =
          engine::StoreImpl::Open(Options(dir, SsdBackend::kNative), Tables(), {.env = &env});
      if (store.ok()) (void)RunWorkload(**store, Plan(seed), &progress);
    }  // the store is dropped; its Close fails like every call after the cut
    env.ClearRules();
    ASSERT_TRUE(env.DropUnsyncedWrites().ok());
    const Outcome outcome = ReadProgress(ReadFile(progress_path));
    campaign.last_steps[outcome.last_step]++;
    std::vector<int64_t> allowed = {outcome.last_done};
    if (outcome.in_flight >= 0) allowed.push_back(outcome.in_flight);
    auto store = Store::Open(Options(dir, SsdBackend::kNative), Tables());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ExpectCheckpoint(**store, Plan(seed), allowed);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    ASSERT_TRUE((*store)->Close().ok());
  }
  PrintSteps(campaign);
}

}  // namespace
}  // namespace strata::crash
