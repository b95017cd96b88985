// strata-test-labels: unit gpu
// The GPU and the host runner agree bit for bit on the same inputs where the
// arithmetic order is the same: initializer, and Push without duplicate keys
// for every optimizer (skipped without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/device_table.h"
#include "tests/kernels/table_harness.h"

namespace strata::kernels {
namespace {

using testing::Harness;
using testing::MakeTable;

class GpuHostAgreementTest : public ::testing::TestWithParam<Optimizer> {
 protected:
  void SetUp() override {
    if (VisibleGpuCount() == 0) GTEST_SKIP() << "no CUDA device visible" << CudaBuildInfo();
  }
};

TEST_P(GpuHostAgreementTest, SameRowsBitForBit) {
  DeviceTableOptions o;
  o.capacity_rows = 50000;
  o.dim = 24;
  o.optimizer.kind = GetParam();
  o.optimizer.learning_rate = 0.05f;
  o.optimizer.initial_accumulator = 0.1f;
  o.optimizer.ftrl_l1 = 0.001f;
  o.initializer.seed = 1234;
  auto host = MakeTable(Runner::kHost, o);
  auto gpu = MakeTable(Runner::kGpu, o);
  ASSERT_NE(host, nullptr);
  ASSERT_NE(gpu, nullptr);
  Harness hh(host.get()), hg(gpu.get());
  std::mt19937_64 rng(99);
  std::vector<Key> keys(40000);
  for (Key& k : keys) k = rng();
  keys[0] = 0;
  keys[1] = ~Key{0};
  std::vector<float> vh, vg;
  std::vector<uint8_t> ih, ig;
  ASSERT_TRUE(hh.FindOrInsert(keys, &vh, &ih, 3).ok());
  ASSERT_TRUE(hg.FindOrInsert(keys, &vg, &ig, 3).ok());
  ASSERT_EQ(ih, ig);
  ASSERT_EQ(0, std::memcmp(vh.data(), vg.data(), vh.size() * sizeof(float)));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int step = 0; step < 4; ++step) {
    std::vector<Key> batch(keys.begin() + step * 5000, keys.begin() + step * 5000 + 20000);
    std::vector<float> grads(batch.size() * o.dim);
    for (float& g : grads) g = u(rng);
    ASSERT_TRUE(hh.Push(batch, grads).ok());
    ASSERT_TRUE(hg.Push(batch, grads).ok());
  }
  ASSERT_TRUE(hh.FindRows(keys, &vh, &ih).ok());
  ASSERT_TRUE(hg.FindRows(keys, &vg, &ig).ok());
  size_t differ = 0;
  for (size_t i = 0; i < vh.size(); ++i) {
    if (std::memcmp(&vh[i], &vg[i], sizeof(float)) != 0) ++differ;
  }
  EXPECT_EQ(differ, 0u) << OptimizerName(GetParam()) << ": " << differ << " of " << vh.size()
                        << " floats differ";
}

INSTANTIATE_TEST_SUITE_P(AllOptimizers, GpuHostAgreementTest,
                         ::testing::Values(Optimizer::kSgd, Optimizer::kAdagrad,
                                           Optimizer::kRowwiseAdagrad, Optimizer::kAdam,
                                           Optimizer::kFtrl),
                         [](const auto& info) { return std::string(OptimizerName(info.param)); });

TEST(GpuHostInitializerTest, NormalInitializerWithinOneUlp) {
  if (VisibleGpuCount() == 0) GTEST_SKIP() << "no CUDA device visible" << CudaBuildInfo();
  DeviceTableOptions o;
  o.capacity_rows = 20000;
  o.dim = 16;
  o.initializer.kind = Initializer::kNormal;
  o.initializer.scale = 1.0f;
  auto host = MakeTable(Runner::kHost, o);
  auto gpu = MakeTable(Runner::kGpu, o);
  ASSERT_NE(host, nullptr);
  ASSERT_NE(gpu, nullptr);
  Harness hh(host.get()), hg(gpu.get());
  std::vector<Key> keys(10000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 0x9e3779b97f4a7c15ULL;
  std::vector<float> vh, vg;
  std::vector<uint8_t> ih, ig;
  ASSERT_TRUE(hh.FindOrInsert(keys, &vh, &ih, 0).ok());
  ASSERT_TRUE(hg.FindOrInsert(keys, &vg, &ig, 0).ok());
  for (size_t i = 0; i < vh.size(); ++i) {
    ASSERT_LE(std::fabs(vh[i] - vg[i]), std::fabs(vh[i]) * 2.4e-7f + 1e-30f) << i;
  }
}

}  // namespace
}  // namespace strata::kernels
