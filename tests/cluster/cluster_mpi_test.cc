// strata-test-labels: integration
// strata-test-timeout: 300
// strata::Cluster under real `mpirun` for 1, 2, 3 and 4 ranks on one machine
// (--oversubscribe; --allow-run-as-root when root): tests/cluster/
// cluster_mpi_helper.cc runs the scenarios, this test launches it and reads
// each rank's line. Skips (with the reason) only when mpirun is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cluster/manifest.h"
#include "io/env.h"
#include "tests/util/scratch_dir.h"

namespace strata::cluster {
namespace {

std::string Mpirun() {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', pos), dirs.size());
    const std::string candidate = dirs.substr(pos, end - pos) + "/mpirun";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    pos = end + 1;
  }
  return "";
}

std::string Helper() { return std::string(STRATA_TEST_BINARY_DIR) + "/bin/cluster_mpi_helper"; }

struct MpiRun {
  int exit_code = -1;
  std::string output;
  std::vector<std::string> lines;  // the ranks' "cluster-helper ..." lines
};

// `mpirun -np ranks helper scenario dir` under `timeout`; `env` goes first
// ("NAME=value ", exported to the ranks by mpirun -x).
MpiRun RunRanks(int ranks, const std::string& scenario, const std::string& dir,
                const std::string& env = "") {
  // Open MPI's own runtime leaks at exit (its components, hwloc), so under
  // AddressSanitizer the ranks run without the leak check; the Cluster's
  // code is leak-checked through its MPI-free tests.
  std::string cmd = env +
                    "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" timeout 240 " +
                    Mpirun() + " --oversubscribe";
  if (::geteuid() == 0) cmd += " --allow-run-as-root";
  // One machine: shared memory and self only, and ranks yield while they
  // wait (more ranks than cores).
  cmd +=
      " --mca btl self,vader --mca btl_vader_single_copy_mechanism none"
      " --mca mpi_yield_when_idle 1 -np " +
      std::to_string(ranks) + " " + Helper() + " " + scenario + " " + dir + " 2>&1";
  MpiRun run;
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) run.output.append(buf, n);
  const int rc = ::pclose(p);
  run.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  size_t pos = 0;
  while (pos < run.output.size()) {
    const size_t end = std::min(run.output.find('\n', pos), run.output.size());
    const std::string line = run.output.substr(pos, end - pos);
    if (line.rfind("cluster-helper ", 0) == 0) run.lines.push_back(line);
    pos = end + 1;
  }
  return run;
}

// Every rank passed, and printed the same detail after the colon.
void ExpectAllPass(const MpiRun& run, int ranks, const std::string& scenario) {
  ASSERT_EQ(run.exit_code, 0) << run.output;
  ASSERT_EQ(run.lines.size(), static_cast<size_t>(ranks)) << run.output;
  for (const std::string& line : run.lines) {
    EXPECT_NE(line.find(" PASS " + scenario + ":"), std::string::npos) << line;
  }
}

class ClusterMpiTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (Mpirun().empty()) GTEST_SKIP() << "mpirun is not installed (scripts/deps.sh installs it)";
    if (!std::filesystem::exists(Helper())) {
      GTEST_SKIP() << Helper() << " not built: the build found no MPI (STRATA_MPI)";
    }
  }
  strata::testing::ScratchDir dir_;
};

TEST_P(ClusterMpiTest, PullPushMatchSingleStoreAcrossCheckpointAndReopen) {
  const MpiRun run = RunRanks(GetParam(), "pull_push", dir_.path());
  ExpectAllPass(run, GetParam(), "pull_push");
}

TEST_P(ClusterMpiTest, BadInputFailsTheSameOnEveryRank) {
  const MpiRun run = RunRanks(GetParam(), "bad_input", dir_.path());
  ExpectAllPass(run, GetParam(), "bad_input");
}

TEST_P(ClusterMpiTest, ReopenWithAnotherWorldSizeNamesBothSizes) {
  const int ranks = GetParam();
  const int other = ranks == 1 ? 2 : ranks - 1;
  ExpectAllPass(RunRanks(ranks, "create", dir_.path()), ranks, "create");
  const MpiRun run = RunRanks(other, "reopen", dir_.path());
  ExpectAllPass(run, other, "reopen");
  for (const std::string& line : run.lines) {
    EXPECT_NE(line.find("InvalidArgument"), std::string::npos) << line;
    EXPECT_NE(line.find("cluster of " + std::to_string(ranks) + " ranks; this one has " +
                        std::to_string(other)),
              std::string::npos)
        << line;
  }
}

TEST_P(ClusterMpiTest, InterruptedCheckpointIsRefusedNamingTheRank) {
  const int ranks = GetParam();
  ExpectAllPass(RunRanks(ranks, "create", dir_.path()), ranks, "create");
  // The last rank's record as a crash during its shard checkpoint leaves it.
  const std::string cluster_dir = dir_.File("cluster");
  const std::string shard = ShardDir(cluster_dir, ranks - 1);
  io::Env* env = io::Env::Default();
  Result<std::optional<std::string>> text = ReadSmallFile(env, shard, kShardRecordName);
  ASSERT_TRUE(text.ok() && text->has_value()) << text.status().ToString();
  Result<ShardRecord> record = DecodeShardRecord(**text, shard);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  record->pending = record->generation + 1;
  ASSERT_TRUE(env->WriteFileAtomically(shard, kShardRecordName,
                                       std::string(kShardRecordName) + ".tmp",
                                       EncodeShardRecord(*record))
                  .ok());
  const MpiRun run = RunRanks(ranks, "reopen", dir_.path());
  ExpectAllPass(run, ranks, "reopen");
  for (const std::string& line : run.lines) {
    EXPECT_NE(line.find("FailedPrecondition: "), std::string::npos) << line;
    EXPECT_NE(line.find("): rank " + std::to_string(ranks - 1) + ": "), std::string::npos) << line;
    EXPECT_NE(line.find("not at one generation"), std::string::npos) << line;
  }
}

TEST_P(ClusterMpiTest, StoppedRankMakesTheOthersFailWithinTheTimeout) {
  const int ranks = GetParam();
  if (ranks == 1) GTEST_SKIP() << "needs a second rank to stop";
  // The job fails (a rank is killed): only the survivors' lines count.
  const MpiRun run = RunRanks(ranks, "stall", dir_.path());
  ASSERT_EQ(run.lines.size(), static_cast<size_t>(ranks - 1)) << run.output;
  for (const std::string& line : run.lines) {
    EXPECT_NE(line.find(" PASS stall: Unavailable: "), std::string::npos) << line;
    EXPECT_NE(line.find("did not complete within 5000 ms"), std::string::npos) << line;
  }
}

// Four ranks, two-phase against flat: as one node of four GPUs joined in an
// NVLink ring (0-1-2-3-0: 0 and 2, 1 and 3 forward through a middleman),
// and as two nodes of two (rank 1 to rank 3 goes 1 -> 0 -> 2 -> 3 through
// both NIC GPUs).
TEST(ClusterTwoPhaseTest, SameRowsAsFlatOnOneNodeAndOnTwo) {
  if (Mpirun().empty()) GTEST_SKIP() << "mpirun is not installed (scripts/deps.sh installs it)";
  if (!std::filesystem::exists(Helper())) GTEST_SKIP() << Helper() << " not built (no MPI)";
  strata::testing::ScratchDir dir;
  const std::vector<std::pair<std::string, std::string>> topologies = {
      {"ring4", "strata-topology 1\ngpus 4\nnvlink 0 1\nnvlink 1 2\nnvlink 2 3\nnvlink 3 0\n"},
      {"pair2", "strata-topology 1\ngpus 2\nnvlink 0 1\nnic_gpu 0\n"},
  };
  for (const auto& [name, text] : topologies) {
    ASSERT_TRUE(
        io::Env::Default()->WriteFileAtomically(dir.path(), name, name + ".tmp", text).ok());
    const std::string run_dir = dir.File("run-" + name);
    std::filesystem::create_directories(run_dir);
    const MpiRun run =
        RunRanks(4, "two_phase", run_dir, "STRATA_HELPER_TOPOLOGY=" + dir.File(name) + " ");
    ExpectAllPass(run, 4, "two_phase");
  }
}

// k-step merging of dense parameters (strata::DenseSync) against a model of
// every rank's Adam, and its bytes at k = 1 and k = 10.
TEST_P(ClusterMpiTest, DenseSyncMergesEveryKStepsAtOneKthTheBytes) {
  const MpiRun run = RunRanks(GetParam(), "dense_sync", dir_.path());
  ExpectAllPass(run, GetParam(), "dense_sync");
}

INSTANTIATE_TEST_SUITE_P(Ranks, ClusterMpiTest, ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "Ranks";
                         });

}  // namespace
}  // namespace strata::cluster
