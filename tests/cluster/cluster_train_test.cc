// strata-test-labels: integration
// strata-test-timeout: 600
//
// `mpirun -np 2 strata train ... --cluster`: the example's click model
// trained data-parallel over a strata::Cluster on the shipped Criteo sample
// (rows r % 2 on rank r, dense parameters averaged every step) reaches a
// validation AUC close to the same training in one process at the same
// global batch (two ranks of 256 rows a step against one of 512: the same
// rows per step and steps per epoch). Skips (with the reason) only when
// mpirun is missing or the build found no MPI.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.h"
#include "tests/cluster/mpi_runner.h"
#include "tests/util/source_files.h"

namespace strata::cluster {
namespace {

using bench::testing::Cli;
using bench::testing::RunCli;

// A small, quick configuration: 6,000 rows, one epoch, 4 factors, T0 and T1
// smaller than the rows the run touches (every tier in use).
const std::string kFlags =
    " --rows-max 6000 --epochs 1 --dim 4 --device-rows 2048 --dram-rows 8192 --json";

// Both runs' models learn (validation AUC above `floor`; 0.5 is chance) and
// agree within `tolerance`.
void ExpectLearnAlike(const nlohmann::json& a, const nlohmann::json& b, double floor,
                      double tolerance) {
  const double auc_a = a["validation_auc"].get<double>();
  const double auc_b = b["validation_auc"].get<double>();
  EXPECT_GT(auc_a, floor);
  EXPECT_GT(auc_b, floor);
  EXPECT_NEAR(auc_b, auc_a, tolerance) << "AUC " << auc_a << " against " << auc_b;
}

class ClusterTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = testing::MpiSkipReason("train"); !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(std::filesystem::exists(Cli())) << Cli() << " not built";
  }

  // The JSON of `mpirun -np ranks strata train <sample> args`; a failed run
  // fails the test and gives an empty object.
  static nlohmann::json TrainUnderMpirun(int ranks, const std::string& args) {
    std::string out;
    const int rc = testing::RunCommand(testing::MpirunCommand(ranks) + " " + Cli() + " train " +
                                           strata::testing::CriteoSamplePath() + args,
                                       &out);
    EXPECT_EQ(rc, 0) << out;
    nlohmann::json j = testing::ParseJsonOutput(out);
    EXPECT_TRUE(j.contains("validation_auc")) << out;
    return rc == 0 ? j : nlohmann::json::object();
  }
};

TEST_F(ClusterTrainTest, TwoRanksReachTheAucOfOne) {
  const std::string data = strata::testing::CriteoSamplePath();
  std::string out;
  ASSERT_EQ(RunCli("train " + data + kFlags + " --batch-size 512 --no-gpu", &out), 0) << out;
  const nlohmann::json one = testing::ParseJsonOutput(out);
  ASSERT_TRUE(one.contains("validation_auc")) << out;
  const nlohmann::json two = TrainUnderMpirun(2, kFlags + " --cluster");
  ASSERT_TRUE(two.contains("validation_auc"));
  EXPECT_EQ(two["ranks"], 2);
  EXPECT_EQ(two["rows_per_rank"], 3000);
  // The model learns at both sizes (measured 0.617 and 0.621), and the two
  // agree.
  ExpectLearnAlike(one, two, 0.58, 0.02);
}

// `train --cluster --kstep K` trains the dense part with strata::DenseSync:
// the all-reduces and their bytes are counted inside DenseSync on each rank.
// Per epoch of S steps there are ceil(S / K) merges (every K-th step, and one
// after the epoch's last training batch when steps are left unmerged), each
// of 2 x (1 + 13 + 13 x dim) floats (parameters and Adam's second moment of
// the bias, the 13 Criteo dense weights and their factors). On the same data
// K = 10 sends exactly a tenth of K = 1's bytes, and the model is as good.
TEST_F(ClusterTrainTest, KStepMergingSendsOneKthOfTheDenseBytes) {
  // 4,000 rows over 2 ranks: 2,000 each, 1,600 of them training rows, 50
  // steps of 32 rows.
  const std::string flags =
      " --rows-max 4000 --epochs 1 --dim 4 --batch-size 32 --device-rows 2048"
      " --dram-rows 8192 --json --cluster --kstep ";
  const uint64_t floats_per_merge = 2 * (1 + 13 + 13 * 4);
  auto run = [&](uint32_t k) { return TrainUnderMpirun(2, flags + std::to_string(k)); };
  const nlohmann::json k1 = run(1), k10 = run(10), k15 = run(15);
  ASSERT_TRUE(k1.contains("dense_steps") && k10.contains("dense_steps") &&
              k15.contains("dense_steps"));
  const uint64_t steps = k1["dense_steps"].get<uint64_t>();
  ASSERT_EQ(steps, 50u);
  EXPECT_EQ(k10["dense_steps"], steps);
  EXPECT_EQ(k15["dense_steps"], steps);
  EXPECT_EQ(k1["kstep"], 1);
  EXPECT_EQ(k10["kstep"], 10);
  // Per rank: every all-reduce counted, with its bytes.
  for (const nlohmann::json* j : {&k1, &k10, &k15}) {
    const uint64_t k = (*j)["kstep"].get<uint64_t>();
    const uint64_t merges = (steps + k - 1) / k;
    EXPECT_EQ((*j)["dense_allreduces"], merges) << "k " << k;
    ASSERT_EQ((*j)["dense_per_rank"].size(), 2u);
    for (const nlohmann::json& r : (*j)["dense_per_rank"]) {
      EXPECT_EQ(r["steps"], steps) << "k " << k;
      EXPECT_EQ(r["allreduces"], merges) << "k " << k;
      EXPECT_EQ(r["allreduce_bytes"], merges * floats_per_merge * sizeof(float)) << "k " << k;
    }
    EXPECT_EQ((*j)["dense_allreduce_bytes"], 2 * merges * floats_per_merge * sizeof(float));
  }
  // 50 steps: K = 10 merges 5 times, a tenth of K = 1's 50, exactly; K = 15
  // merges at steps 15, 30, 45 and after the epoch's last step (50).
  const uint64_t bytes1 = k1["dense_allreduce_bytes"].get<uint64_t>();
  const uint64_t bytes10 = k10["dense_allreduce_bytes"].get<uint64_t>();
  EXPECT_EQ(bytes10 * 10, bytes1) << bytes10 << " bytes at K = 10, " << bytes1 << " at K = 1";
  EXPECT_EQ(k15["dense_allreduces"], 4);
  // The model learns either way (measured 0.6584 and 0.6583), and alike.
  ExpectLearnAlike(k1, k10, 0.6, 0.01);
}

// Bad --kstep and --dense-lr values are usage errors naming the flag (exit
// code 2, before anything runs); --kstep needs --cluster, --dense-lr needs
// --kstep.
TEST(TrainKStepFlagsTest, BadValuesAndMissingClusterNameTheFlag) {
  ASSERT_TRUE(std::filesystem::exists(Cli())) << Cli() << " not built";
  const std::string train = "train " + strata::testing::CriteoSamplePath() + " --rows-max 100 ";
  struct Case {
    std::string args, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"--cluster --kstep 0", "--kstep: '0' is not in [1, "},
           {"--cluster --kstep -3", "--kstep: '-3' is not a non-negative integer"},
           {"--cluster --kstep ten", "--kstep: 'ten' is not a non-negative integer"},
           {"--cluster --kstep 2.5", "--kstep: '2.5' is not a non-negative integer"},
           {"--cluster --kstep", "--kstep"},
           {"--kstep 10", "--kstep requires --cluster"},
           {"--cluster --dense-lr 0.01", "--dense-lr requires --kstep"},
           {"--cluster --kstep 10 --dense-lr 0", "--dense-lr: '0' is not in (0, "},
       }) {
    SCOPED_TRACE(c.args);
    std::string out;
    EXPECT_EQ(RunCli(train + c.args, &out, /*timeout_s=*/60), 2) << out;
    EXPECT_EQ(out.rfind("strata train: ", 0), 0u) << out;
    EXPECT_NE(out.find(c.expect), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace strata::cluster
