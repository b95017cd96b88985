// strata-test-labels: integration
// strata-test-timeout: 120
//
// build/bin/strata_cluster_bench and `strata bench cluster` under
// `mpirun -np 2`, a few small batches: the --json line parses, has every
// field docs/cluster.md ("Measured") reads, and the bytes both Clusters
// counted equal the bytes the bench's model prints, which equal this test's
// own model of the same batches (8 + 4 x dim bytes per distinct key sent to
// the other rank, for Pull and for Push). Skips (with the reason) only when
// mpirun is missing or the build found no MPI.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/hash.h"
#include "strata/cluster_owner.h"
#include "tests/cluster/mpi_runner.h"
#include "tests/util/scratch_dir.h"

namespace strata::cluster {
namespace {

constexpr int kRanks = 2;
constexpr uint64_t kBatches = 4;
constexpr uint64_t kKeys = 256;
constexpr uint64_t kKeySpace = 4096;
constexpr uint32_t kDim = 8;

// build/bin/<name>.
std::string Binary(const std::string& name) {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  return std::string(bin != nullptr ? bin : STRATA_TEST_BINARY_DIR) + "/bin/" + name;
}

// The bytes per batch the ranks send one another: rank r's batch b is
// kKeys draws of SplitMix64(b * 65537 + r + 1) modulo the key space (the
// bench's BatchKeys); each distinct key another rank owns moves its key and
// its row in Pull and in Push.
double ModelBytesPerBatch() {
  uint64_t bytes = 0;
  for (uint64_t b = 0; b < kBatches; ++b) {
    for (int r = 0; r < kRanks; ++r) {
      SplitMix64 rng(b * 65537 + uint64_t(r) + 1);
      std::unordered_set<Key> distinct;
      for (uint64_t i = 0; i < kKeys; ++i) distinct.insert(rng.Next() % kKeySpace);
      for (Key k : distinct) {
        if (ClusterOwner(0, k, kRanks) != uint32_t(r)) {
          bytes += 2 * (sizeof(Key) + kDim * sizeof(float));
        }
      }
    }
  }
  return double(bytes) / double(kBatches);
}

// Runs `binary` + `command` (the bench's flags follow) under mpirun and
// checks its report.
void RunAndCheck(const std::string& binary, const std::string& command) {
  ASSERT_TRUE(std::filesystem::exists(binary)) << binary << " not built";
  strata::testing::ScratchDir dir;
  std::string out;
  const int rc = testing::RunCommand(
      testing::MpirunCommand(kRanks, 90) + " " + binary + command + " --dir " + dir.File("c") +
          " --json --batches " + std::to_string(kBatches) + " --keys " + std::to_string(kKeys) +
          " --key-space " + std::to_string(kKeySpace) + " --dim " + std::to_string(kDim),
      &out);
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json j = testing::ParseJsonOutput(out);
  ASSERT_FALSE(j.empty()) << "no JSON in: " << out;

  EXPECT_EQ(j.value("ranks", 0), kRanks);
  EXPECT_EQ(j.value("batches", uint64_t{0}), kBatches);
  EXPECT_EQ(j.value("keys_per_rank_batch", uint64_t{0}), kKeys);
  EXPECT_EQ(j.value("dim", 0u), kDim);

  const double model = ModelBytesPerBatch();
  ASSERT_GT(model, 0);
  EXPECT_DOUBLE_EQ(j.value("model_bytes_per_batch", -1.0), model) << out;
  EXPECT_DOUBLE_EQ(j.value("bytes_sent_per_batch", -1.0), model) << out;
  EXPECT_DOUBLE_EQ(j.value("aligned_bytes_sent_per_batch", -1.0), model) << out;

  // Five all-to-alls per batch on each side: header, keys and rows of Pull,
  // header and keys with their gradients of Push.
  EXPECT_DOUBLE_EQ(j.value("exchange_calls_per_batch", -1.0), 5.0);
  EXPECT_DOUBLE_EQ(j.value("aligned_exchange_calls_per_batch", -1.0), 5.0);
  EXPECT_EQ(j.value("plain_calls_per_batch", 0), 5);

  for (const char* field :
       {"cluster_ms_per_batch", "exchange_ms_per_batch", "exchange_fastest_rank_ms_per_batch",
        "plain_alltoallv_ms_per_batch", "plain_over_exchange", "aligned_cluster_ms_per_batch",
        "aligned_exchange_ms_per_batch", "aligned_exchange_fastest_rank_ms_per_batch",
        "aligned_wait_ms_per_batch", "plain_aligned_ms_per_batch",
        "plain_aligned_over_exchange_aligned"}) {
    ASSERT_TRUE(j.contains(field) && j[field].is_number()) << field << " in " << out;
    const double v = j[field].get<double>();
    EXPECT_TRUE(std::isfinite(v) && v >= 0) << field << " = " << v;
  }
  // Timed work took time; the fastest rank is no slower than the slowest.
  EXPECT_GT(j["cluster_ms_per_batch"].get<double>(), 0);
  EXPECT_GT(j["aligned_exchange_ms_per_batch"].get<double>(), 0);
  EXPECT_GT(j["plain_aligned_ms_per_batch"].get<double>(), 0);
  EXPECT_LE(j["aligned_exchange_fastest_rank_ms_per_batch"].get<double>(),
            j["aligned_exchange_ms_per_batch"].get<double>());
}

class ClusterBenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::Mpirun().empty()) {
      GTEST_SKIP() << "mpirun is not installed (scripts/deps.sh installs it)";
    }
#ifndef STRATA_HAVE_MPI
    GTEST_SKIP() << "the build found no MPI (STRATA_MPI): there is no cluster bench";
#endif
  }
};

TEST_F(ClusterBenchTest, ProgramJsonParsesAndCountedBytesEqualTheModel) {
  RunAndCheck(Binary("strata_cluster_bench"), "");
}

TEST_F(ClusterBenchTest, CliCommandJsonParsesAndCountedBytesEqualTheModel) {
  RunAndCheck(Binary("strata"), " bench cluster");
}

// The batches are drawn before the clock starts, so --batches x --keys is
// bounded: past it the bench refuses, naming both flags, before any work.
TEST_F(ClusterBenchTest, BatchesTimesKeysPastTheBoundIsRefused) {
  const std::string binary = Binary("strata_cluster_bench");
  ASSERT_TRUE(std::filesystem::exists(binary)) << binary << " not built";
  strata::testing::ScratchDir dir;
  std::string out;
  const int rc = testing::RunCommand(testing::MpirunCommand(1, 60) + " " + binary + " --dir " +
                                         dir.File("c") + " --batches 1073741824 --keys 4096",
                                     &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("--batches 1073741824 x --keys 4096"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.File("c"))) << out;
}

}  // namespace
}  // namespace strata::cluster
