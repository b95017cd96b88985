// strata-test-labels: integration many-locks
// strata-test-timeout: 600
//
// `mpirun -np R strata replay TRACE --cluster --verify` on a trace of the
// shipped Criteo sample (26 tables), 4 workers, tiers small enough that
// rows move through T0, T1 and the SSD on every rank: every pulled row
// checked against the model of all ranks' pushes, and the rows at the end
// equal those of a single-process replay of the same trace (their exports),
// at 2, 3 and 4 ranks and under injected SSD faults. Skips (with the reason)
// only when mpirun is missing or the build found no MPI.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "tests/cli/cli_runner.h"
#include "tests/cluster/mpi_runner.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/source_files.h"

namespace strata::cluster {
namespace {

using bench::testing::Cli;
using bench::testing::RunCli;

constexpr int kBatches = 8;
constexpr int kBatchSize = 200;
// Small tiers per rank (rows of all 26 tables): T0 and T1 hold a fraction of
// a batch's rows, so rows move through every tier.
constexpr const char* kTiers = " --device-rows 1500 --dram-rows 3000 --dim 4 --workers 4";

// table+key -> values of an export (row_export.h).
std::map<std::string, std::vector<float>> ReadExport(const std::string& path) {
  std::map<std::string, std::vector<float>> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string table, key;
    fields >> table >> key;
    std::vector<float>& values = rows[table + " " + key];
    float v;
    while (fields >> v) values.push_back(v);
  }
  return rows;
}

// The same keys, and every value within a few float roundings: SGD sums
// the same gradients in both runs, grouped differently (the cluster's owners
// add every rank's gradients of a key before one push), so the last bit of
// a row may differ; a lost or doubled push moves it by at least 2^-21.
void ExpectSameRows(const std::string& expected_path, const std::string& actual_path) {
  const auto expected = ReadExport(expected_path);
  const auto actual = ReadExport(actual_path);
  ASSERT_FALSE(expected.empty()) << expected_path;
  ASSERT_EQ(expected.size(), actual.size()) << actual_path;
  size_t checked = 0;
  for (const auto& [key, values] : expected) {
    auto it = actual.find(key);
    ASSERT_NE(it, actual.end()) << "row " << key << " missing from " << actual_path;
    ASSERT_EQ(it->second.size(), values.size()) << key;
    for (size_t d = 0; d < values.size(); ++d) {
      ASSERT_NEAR(it->second[d], values[d], 2e-6) << "row " << key << " dim " << d;
    }
    ++checked;
  }
  EXPECT_EQ(checked, expected.size());
}

class ClusterReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::MpiSkipReason("replay"); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(std::filesystem::exists(Cli())) << Cli() << " not built";
    trace_ = dir_.File("criteo.trace");
    std::string out;
    ASSERT_EQ(RunCli("trace import --format criteo " + strata::testing::CriteoSamplePath() +
                         " --out " + trace_ + " --batch-size " + std::to_string(kBatchSize),
                     &out),
              0)
        << out;
    // The single-process replay every cluster run is compared with.
    single_ = dir_.File("single.rows");
    ASSERT_EQ(RunCli("replay " + trace_ + " --dir " + dir_.File("single") + kTiers +
                         " --verify --batches " + std::to_string(kBatches) + " --export " +
                         single_ + " --json",
                     &out),
              0)
        << out;
    single_json_ = testing::ParseJsonOutput(out);
    ASSERT_EQ(single_json_["batches"], kBatches) << out;
  }

  // `mpirun -np ranks strata replay --cluster ...`: its JSON, or an empty
  // object (with a failure) when it did not succeed.
  nlohmann::json RunCluster(int ranks, const std::string& name, const std::string& flags) {
    std::string out;
    const int rc = testing::RunCommand(testing::MpirunCommand(ranks) + " " + Cli() + " replay " +
                                           trace_ + " --cluster --dir " + dir_.File(name) + kTiers +
                                           " --batches " + std::to_string(kBatches) + " --export " +
                                           dir_.File(name + ".rows") + " --json " + flags,
                                       &out);
    EXPECT_EQ(rc, 0) << out;
    if (rc != 0) return nlohmann::json::object();
    nlohmann::json j = testing::ParseJsonOutput(out);
    EXPECT_TRUE(j.contains("cluster")) << out;
    return j;
  }

  void ExpectVerifiedLikeSingle(const nlohmann::json& j, int ranks, const std::string& name) {
    ASSERT_TRUE(j.contains("cluster"));
    const nlohmann::json& c = j["cluster"];
    EXPECT_EQ(c["ranks"], ranks);
    EXPECT_EQ(c["batches"], kBatches);
    // Every key of every batch was pulled once and checked; every distinct
    // key was found exactly once, on its owner, at the end.
    EXPECT_EQ(c["verified_rows"], single_json_["verified_rows"]);
    EXPECT_EQ(c["pulls"], single_json_["verified_rows"]);
    EXPECT_EQ(c["scanned_rows"], single_json_["scanned_rows"]);
    ASSERT_EQ(j["ranks"].size(), static_cast<size_t>(ranks));
    uint64_t bytes = 0;
    for (const auto& r : j["ranks"]) {
      // Each rank ran its share of the batches (b % R) and exchanged rows.
      EXPECT_GE(r["batches"].get<uint64_t>(), static_cast<uint64_t>(kBatches / ranks));
      EXPECT_GT(r["rows_exchanged"].get<uint64_t>(), 0u);
      EXPECT_GT(r["ssd_row_writes"].get<uint64_t>(), 0u);
      bytes += r["bytes_sent"].get<uint64_t>();
    }
    EXPECT_EQ(c["bytes_sent"].get<uint64_t>(), bytes);
    EXPECT_NEAR(c["bytes_sent_per_batch"].get<double>(), double(bytes) / kBatches, 1.0);
    ExpectSameRows(single_, dir_.File(name + ".rows"));
  }

  strata::testing::ScratchDir dir_;
  std::string trace_;
  std::string single_;
  nlohmann::json single_json_;
};

TEST_F(ClusterReplayTest, RowsEqualASingleProcessReplayAt2To4Ranks) {
  for (int ranks : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const std::string name = "c" + std::to_string(ranks);
    ExpectVerifiedLikeSingle(RunCluster(ranks, name, "--verify --lookahead 2"), ranks, name);
  }
}

TEST_F(ClusterReplayTest, VerifiesUnderInjectedSsdFaults) {
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const std::string name = "f" + std::to_string(ranks);
    const nlohmann::json j =
        RunCluster(ranks, name, "--verify --faults eio=0.01,delay_us=200,seed=3");
    ExpectVerifiedLikeSingle(j, ranks, name);
    if (j.contains("cluster")) {
      EXPECT_EQ(j["cluster"]["faults"], "eio=0.01,delay_us=200,seed=3");
    }
  }
}

TEST_F(ClusterReplayTest, WithoutIntentsEveryPullMayStallAndRowsStillMatch) {
  const nlohmann::json j = RunCluster(3, "n3", "--verify --no-intents");
  ExpectVerifiedLikeSingle(j, 3, "n3");
  if (j.contains("cluster")) {
    EXPECT_GT(j["cluster"]["stall_fraction"].get<double>(), 0.0);
    EXPECT_EQ(j["cluster"]["intents_sent"], 0);
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The cluster a 2-rank replay leaves (checkpointed at its end), resharded
// offline for 3 ranks and exported at 3 ranks: the same rows, byte for byte.
TEST_F(ClusterReplayTest, ReshardTwoToThreeRanksKeepsEveryRow) {
  const nlohmann::json j = RunCluster(2, "r2", "--verify");
  ASSERT_TRUE(j.contains("cluster"));
  const std::string rows2 = ReadFile(dir_.File("r2.rows"));
  ASSERT_FALSE(rows2.empty());
  std::string out;
  ASSERT_EQ(RunCli("cluster reshard --from " + dir_.File("r2") + " --ranks 3 --out " +
                       dir_.File("r3") + " --json",
                   &out),
            0)
      << out;
  const nlohmann::json reshard = testing::ParseJsonOutput(out);
  EXPECT_EQ(reshard["rows"], j["cluster"]["scanned_rows"]) << out;
  ASSERT_EQ(reshard["rows_per_rank"].size(), 3u);
  for (const auto& n : reshard["rows_per_rank"]) EXPECT_GT(n.get<uint64_t>(), 0u);
  ASSERT_EQ(testing::RunCommand(testing::MpirunCommand(3) + " " + Cli() + " cluster export --dir " +
                                    dir_.File("r3") + " --out " + dir_.File("r3.rows"),
                                &out),
            0)
      << out;
  EXPECT_EQ(ReadFile(dir_.File("r3.rows")), rows2);
  // The old size no longer opens it, naming both sizes.
  EXPECT_NE(testing::RunCommand(testing::MpirunCommand(2) + " " + Cli() + " cluster export --dir " +
                                    dir_.File("r3") + " --out " + dir_.File("x.rows"),
                                &out),
            0);
  EXPECT_NE(out.find("cluster of 3 ranks; this one has 2"), std::string::npos) << out;
}

// Bad flags fail on every rank the same way, before anything is written.
TEST_F(ClusterReplayTest, ANonEmptyDirectoryIsRefusedOnEveryRank) {
  const std::string dir = dir_.File("taken");
  std::filesystem::create_directories(dir + "/x");
  std::string out;
  const int rc = testing::RunCommand(testing::MpirunCommand(2) + " " + Cli() + " replay " + trace_ +
                                         " --cluster --dir " + dir + kTiers,
                                     &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("is not empty"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/rank-0")) << out;
}

}  // namespace
}  // namespace strata::cluster
