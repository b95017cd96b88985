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
// Power-loss variant (in-process, both backends): from a random file-system
// call of the SSD tier on, every call fails, then every write not made
// durable by an fsync (data, MANIFEST or CHECKPOINT, renames and creations
// whose directory was not fsynced) is dropped: io::FaultEnv for the native
// backend, storage::testing::RocksPowerLossFs for RocksDB.
//
// The *NativeV2 tests run both variants on the native tier's format 2
// (StoreOptions::ssd_format_version), the *NativeV2Exact ones with its exact
// DRAM index and the *NativeV2Ranges ones with key ranges and their merges
// (StoreOptions::ssd_index, two ranges).
//
// Each campaign prints the SSD merges its trials crossed (StoreStats::
// ssd_merges, noted in the progress file); the long form asserts that some
// trials on format 2 died after merges.
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
#include "tests/storage/ssd/rocksdb_power_loss_fs.h"
#include "tests/util/scratch_dir.h"

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

// The native tier's format the campaign runs (1, or 2 for the *V2 tests)
// and format 2's DRAM index (0 compact, 1 exact, 2 ranges); the child gets both
// through its spec.
uint32_t ssd_format = 1;
int ssd_index = 0;
// Sets ssd_format and ssd_index for a test's campaign, back to 1 and
// compact at its end.
struct FormatScope {
  explicit FormatScope(uint32_t format, SsdIndex index = SsdIndex::kCompact) {
    ssd_format = format;
    ssd_index = static_cast<int>(index);
  }
  ~FormatScope() {
    ssd_format = 1;
    ssd_index = 0;
  }
};
SsdIndex Index() { return static_cast<SsdIndex>(ssd_index); }

std::string BackendName(SsdBackend backend) {
  if (backend == SsdBackend::kRocksDb) return "rocksdb";
  if (ssd_format == 1) return "native";
  if (Index() == SsdIndex::kExact) return "native, format 2, exact index";
  if (Index() == SsdIndex::kRanges) return "native, format 2, key ranges";
  return "native, format 2";
}

using strata::testing::ScratchDir;

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
  env.set_kill_note_fd(progress.fd());
  auto store = engine::StoreImpl::Open(Options(dir, backend, ssd_format, Index()), Tables(), envs);
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
  if (!(in >> dir >> backend >> seed >> kill_at >> param >> progress >> ssd_format >> ssd_index)) {
    _exit(9);
  }
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
    auto store = engine::StoreImpl::Open(
        Options(scratch.path() + "/store", backend, ssd_format, Index()), Tables(), envs);
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
  std::map<char, int> last_steps;         // where the runs died: C checkpoint, P pull, U push, ...
  std::map<std::string, int> kill_calls;  // I/O-call kills: "<step>: <op> <file kind>"
  uint64_t merges = 0;                    // SSD merges the trials crossed, summed
  uint64_t trials_after_merges = 0;       // trials that died after at least one
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

const char* StepName(char step) {
  switch (step) {
    case 'C':
      return "checkpoint";
    case 'D':
      return "after-checkpoint";
    case 'P':
      return "pull";
    case 'U':
      return "push";
    case 'I':
      return "intent";
    default:
      return "open";
  }
}

void PrintSteps(const Campaign& c) {
  std::printf("died in:");
  for (const auto& [step, count] : c.last_steps) {
    std::printf(" %s %d", StepName(step), count);
  }
  std::printf("\n");
  std::printf("merges crossed: %llu, in %llu of %llu trials\n",
              static_cast<unsigned long long>(c.merges),
              static_cast<unsigned long long>(c.trials_after_merges),
              static_cast<unsigned long long>(c.trials));
  if (c.kill_calls.empty()) return;
  std::printf("killed at I/O calls:");
  for (const auto& [call, count] : c.kill_calls) std::printf(" [%s] %d", call.c_str(), count);
  std::printf("\n");
}

// The long form (`make crash`, 100 trials or more) must have died in each
// phase (the kill campaign) and, on format 2, after merges in some trials.
void ExpectLongFormCoverage(SsdBackend backend, const Campaign& campaign, bool phases = true) {
  if (campaign.trials < 100) return;
  if (phases) {
    for (char step : {'C', 'P', 'U'}) {
      EXPECT_GT(campaign.last_steps.count(step) ? campaign.last_steps.at(step) : 0, 0) << step;
    }
  }
  if (backend == SsdBackend::kNative && ssd_format == 2) {
    EXPECT_GT(campaign.trials_after_merges, 0u) << "no trial crossed a merge";
  }
}

// After a trial: notes where it died, reopens its directory and checks the
// rows and clock against the checkpoints the progress file says may be durable.
void ExpectTrialReopens(const std::string& dir, SsdBackend backend, uint64_t seed,
                        const std::string& progress_path, Campaign* campaign) {
  const Outcome outcome = ReadProgress(ReadFile(progress_path));
  campaign->last_steps[outcome.last_step]++;
  campaign->merges += outcome.merges;
  campaign->trials_after_merges += outcome.merges > 0;
  if (!outcome.killed_at.empty()) {
    campaign->kill_calls[std::string(StepName(outcome.last_step)) + ": " + outcome.killed_at]++;
  }
  std::vector<int64_t> allowed = {outcome.last_done};
  if (outcome.in_flight >= 0) allowed.push_back(outcome.in_flight);
  auto store = Store::Open(Options(dir, backend, ssd_format, Index()), Tables());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ExpectCheckpoint(**store, Plan(seed), allowed);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_TRUE((*store)->Close().ok());
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
          std::to_string(static_cast<int>(kill_at)) + " " + std::to_string(param) + " " + progress +
          " " + std::to_string(ssd_format) + " " + std::to_string(ssd_index);
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
    ExpectTrialReopens(dir, backend, seed, progress, &campaign);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
  }
  PrintSteps(campaign);
  ExpectLongFormCoverage(backend, campaign);
}

TEST(CrashCampaignTest, KillNative) { KillCampaign(SsdBackend::kNative); }
TEST(CrashCampaignTest, KillRocksDb) { KillCampaign(SsdBackend::kRocksDb); }
TEST(CrashCampaignTest, KillNativeV2) {
  FormatScope v2(2);
  KillCampaign(SsdBackend::kNative);
}
TEST(CrashCampaignTest, KillNativeV2Exact) {
  FormatScope v2(2, SsdIndex::kExact);
  KillCampaign(SsdBackend::kNative);
}
TEST(CrashCampaignTest, KillNativeV2Ranges) {
  FormatScope v2(2, SsdIndex::kRanges);
  KillCampaign(SsdBackend::kNative);
}

// A power cut for either backend: from a chosen SSD call on every call
// fails, then what no fsync made durable is dropped.
class PowerCut {
 public:
  explicit PowerCut(SsdBackend backend) : backend_(backend), env_(io::Env::Default()) {}
  engine::SsdEnvs Envs() {
    return backend_ == SsdBackend::kNative ? engine::SsdEnvs{.env = &env_}
                                           : engine::SsdEnvs{.rocksdb_env = rocks_.env()};
  }
  // Counts calls without cutting (for the calibration run).
  void Count() {
    if (backend_ == SsdBackend::kNative) {
      ASSERT_TRUE(
          env_.AddRule({.op = io::FaultOp::kAny, .nth_call = std::numeric_limits<uint64_t>::max()})
              .ok());
    }
  }
  uint64_t Calls() const {
    return backend_ == SsdBackend::kNative ? env_.calls_seen() : rocks_.ops_seen();
  }
  void CutAt(uint64_t call) {
    if (backend_ == SsdBackend::kNative) {
      ASSERT_TRUE(env_.AddRule({.op = io::FaultOp::kAny, .nth_call = call}).ok());
    } else {
      rocks_.CutPowerAtOp(call);
    }
  }
  // REQUIRES: the store is closed.
  void LosePower() {
    if (backend_ == SsdBackend::kNative) {
      env_.ClearRules();
      ASSERT_TRUE(env_.DropUnsyncedWrites().ok());
    } else {
      rocks_.CutPowerAtOp(rocks_.ops_seen());  // if the run ended before the cut
      ASSERT_TRUE(rocks_.DropUnsyncedData().ok());
    }
  }

 private:
  const SsdBackend backend_;
  io::FaultEnv env_;
  storage::testing::RocksPowerLossFs rocks_;
};

void PowerLossCampaign(SsdBackend backend) {
  Campaign campaign = StartCampaign(("power loss, " + BackendName(backend)).c_str());
  uint64_t calls = 0;
  {
    ScratchDir scratch;
    PowerCut counter(backend);
    counter.Count();
    auto store = engine::StoreImpl::Open(
        Options(scratch.path() + "/store", backend, ssd_format, Index()), Tables(), counter.Envs());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Progress none("");
    ASSERT_TRUE(RunWorkload(**store, Plan(1), &none).ok());
    ASSERT_TRUE((*store)->Close().ok());
    calls = counter.Calls();
  }
  std::printf("calibration: %llu SSD calls per run\n", static_cast<unsigned long long>(calls));
  ASSERT_GT(calls, 0u);
  std::mt19937_64 rng(campaign.seed);
  for (uint64_t trial = 0; trial < campaign.trials; ++trial) {
    const uint64_t seed = rng();
    const uint64_t cut = 1 + rng() % calls;
    SCOPED_TRACE("trial " + std::to_string(trial) + " seed " + std::to_string(seed) +
                 " power cut at SSD call " + std::to_string(cut));
    ScratchDir scratch;
    const std::string dir = scratch.path() + "/store";
    const std::string progress_path = scratch.path() + "/progress";
    PowerCut power(backend);
    power.CutAt(cut);
    {
      Progress progress(progress_path);
      auto store = engine::StoreImpl::Open(Options(dir, backend, ssd_format, Index()), Tables(),
                                           power.Envs());
      if (store.ok()) (void)RunWorkload(**store, Plan(seed), &progress);
    }  // the store is dropped; its Close fails like every call after the cut
    power.LosePower();
    ExpectTrialReopens(dir, backend, seed, progress_path, &campaign);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
  }
  PrintSteps(campaign);
  ExpectLongFormCoverage(backend, campaign, /*phases=*/false);
}

TEST(CrashCampaignTest, PowerLossNative) { PowerLossCampaign(SsdBackend::kNative); }
TEST(CrashCampaignTest, PowerLossRocksDb) { PowerLossCampaign(SsdBackend::kRocksDb); }
TEST(CrashCampaignTest, PowerLossNativeV2) {
  FormatScope v2(2);
  PowerLossCampaign(SsdBackend::kNative);
}
TEST(CrashCampaignTest, PowerLossNativeV2Exact) {
  FormatScope v2(2, SsdIndex::kExact);
  PowerLossCampaign(SsdBackend::kNative);
}
TEST(CrashCampaignTest, PowerLossNativeV2Ranges) {
  FormatScope v2(2, SsdIndex::kRanges);
  PowerLossCampaign(SsdBackend::kNative);
}

}  // namespace
}  // namespace strata::crash
