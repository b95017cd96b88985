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
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "cluster/manifest.h"
#include "io/env.h"
#include "tests/cli/cli_runner.h"
#include "tests/cluster/mpi_runner.h"
#include "tests/util/scratch_dir.h"

namespace strata::cluster {
namespace {

using testing::Mpirun;
using testing::MpirunCommand;
using testing::RunCommand;

std::string Helper() { return std::string(STRATA_TEST_BINARY_DIR) + "/bin/cluster_mpi_helper"; }

struct MpiRun {
  int exit_code = -1;
  std::string output;
  std::vector<std::string> lines;  // the ranks' "cluster-helper ..." lines
};

// `mpirun -np ranks helper scenario dir` under `timeout`; `env` goes first
// ("NAME=value ", in the environment the ranks inherit from mpirun).
MpiRun RunRanks(int ranks, const std::string& scenario, const std::string& dir,
                const std::string& env = "") {
  MpiRun run;
  run.exit_code = RunCommand(
      env + MpirunCommand(ranks) + " " + Helper() + " " + scenario + " " + dir, &run.output);
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

TEST_P(ClusterMpiTest, SecondClusterOnTheDirectoryIsRefusedOnEveryRank) {
  ExpectAllPass(RunRanks(GetParam(), "second_open", dir_.path()), GetParam(), "second_open");
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
  // The job fails (a rank is killed): only the survivors' lines count. They
  // are read from the files the survivors write, as mpirun may kill a
  // survivor before its stdout reaches it.
  const MpiRun run = RunRanks(ranks, "stall", dir_.path());
  for (int r = 0; r < ranks - 1; ++r) {
    const std::string file = dir_.File("stall-" + std::to_string(r) + ".txt");
    std::ifstream in(file);
    ASSERT_TRUE(in.good()) << "rank " << r << " wrote no " << file << "\n" << run.output;
    std::string line;
    std::getline(in, line);
    EXPECT_NE(line.find(" PASS stall: Unavailable: "), std::string::npos) << line;
    EXPECT_NE(line.find("did not complete within 5000 ms"), std::string::npos) << line;
  }
}

// The records and the manifest a directory holds: generation per rank.
struct OnDisk {
  uint64_t manifest = 0;
  std::vector<uint64_t> records;  // generation, or UINT64_MAX while pending
  bool backups = false;           // any rank-<r>.prev left
};
OnDisk ReadOnDisk(const std::string& cluster_dir, int ranks) {
  OnDisk d;
  io::Env* env = io::Env::Default();
  auto text = ReadSmallFile(env, cluster_dir, kManifestName);
  if (text.ok() && text->has_value()) {
    auto m = DecodeClusterManifest(**text, kManifestName);
    if (m.ok()) d.manifest = m->generation;
  }
  for (int r = 0; r < ranks; ++r) {
    const std::string shard = ShardDir(cluster_dir, r);
    auto rec = ReadSmallFile(env, shard, kShardRecordName);
    uint64_t g = 0;
    if (rec.ok() && rec->has_value()) {
      auto decoded = DecodeShardRecord(**rec, shard);
      if (decoded.ok())
        g = decoded->pending != decoded->generation ? UINT64_MAX : decoded->generation;
    }
    d.records.push_back(g);
    d.backups = d.backups || std::filesystem::exists(shard + ".prev");
  }
  return d;
}

// A rank killed (SIGKILL) at a point of the second cluster checkpoint: the
// job dies; reopening rolls every shard back to generation 1 (clock 4) and
// every row is the model's at that clock; training and checkpointing go on.
TEST_P(ClusterMpiTest, SigkillDuringCheckpointReopensAtOneGeneration) {
  const int ranks = GetParam();
  std::vector<std::string> points = {"record"};
  if (ranks == 2) points = {"backup", "record", "manifest"};
  if (ranks == 4) points = {"manifest"};
  for (const std::string& point : points) {
    SCOPED_TRACE(point);
    const std::string dir = dir_.File(point);
    const MpiRun killed = RunRanks(ranks, "train", dir + " " + point);
    EXPECT_NE(killed.exit_code, 0) << killed.output;
    for (const std::string& line : killed.lines) {
      EXPECT_EQ(line.find(" PASS "), std::string::npos) << line;
    }
    const OnDisk before = ReadOnDisk(dir + "/cluster", ranks);
    EXPECT_EQ(before.manifest, 1u);
    EXPECT_TRUE(before.backups);
    if (point == "manifest") {
      // Every shard checkpointed generation 2 and recorded it: only the
      // copies of generation 1 can bring the cluster back to one generation.
      for (uint64_t g : before.records) EXPECT_EQ(g, 2u);
    }
    const MpiRun verified = RunRanks(ranks, "verify", dir + " 4 " + std::to_string(ranks));
    ExpectAllPass(verified, ranks, "verify");
    const OnDisk after = ReadOnDisk(dir + "/cluster", ranks);
    EXPECT_EQ(after.manifest, 2u);  // the verify's own checkpoint
    for (uint64_t g : after.records) EXPECT_EQ(g, 2u);
    EXPECT_FALSE(after.backups);
  }
}

// `strata cluster reshard` to one rank more (one less at 4): every row in
// its new owner's shard equal to the model, training goes on there, and the
// old world size is refused naming both sizes.
TEST_P(ClusterMpiTest, ReshardKeepsEveryRowForAnotherRankCount) {
  const int ranks = GetParam();
  // Growing (2 -> 3) and shrinking (4 -> 3) cover the cases; each run is four
  // mpirun jobs, too many for two cores at every size.
  if (ranks == 1 || ranks == 3) GTEST_SKIP() << "run at 2 and 4 ranks";
  const int to = ranks == 4 ? 3 : ranks + 1;
  const std::string from = dir_.File("from");
  const std::string out = dir_.File("to");
  ExpectAllPass(RunRanks(ranks, "train", from + " none"), ranks, "train");
  std::string text;
  ASSERT_EQ(bench::testing::RunCli("cluster reshard --from " + from + "/cluster --ranks " +
                                       std::to_string(to) + " --out " + out + "/cluster --json",
                                   &text),
            0)
      << text;
  EXPECT_NE(text.find("\"to_ranks\": " + std::to_string(to)), std::string::npos) << text;
  const MpiRun verified = RunRanks(to, "verify", out + " 8 " + std::to_string(ranks));
  ExpectAllPass(verified, to, "verify");
  const MpiRun refused = RunRanks(ranks, "reopen", out);
  ExpectAllPass(refused, ranks, "reopen");
  for (const std::string& line : refused.lines) {
    EXPECT_NE(line.find("cluster of " + std::to_string(to) + " ranks; this one has " +
                        std::to_string(ranks)),
              std::string::npos)
        << line;
  }
  // Into a directory that is not empty: refused, nothing written.
  EXPECT_NE(
      bench::testing::RunCli(
          "cluster reshard --from " + from + "/cluster --ranks 2 --out " + out + "/cluster", &text),
      0);
  EXPECT_NE(text.find("is not empty"), std::string::npos) << text;
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
