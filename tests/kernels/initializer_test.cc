// The per-key initializer: deterministic in (seed, key, index), the right
// distribution, and different across keys and seeds.
#include "kernels/initializer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace strata::kernels {
namespace {

std::vector<float> Row(const InitializerOptions& init, Key key, uint32_t dim) {
  OptimizerOptions opt;
  opt.kind = Optimizer::kAdagrad;
  opt.initial_accumulator = 0.5f;
  std::vector<float> row(2 * dim);
  InitRow(init, opt, key, dim, row.data());
  return row;
}

TEST(InitializerTest, DeterministicPerSeedAndKey) {
  InitializerOptions init;
  init.seed = 9;
  EXPECT_EQ(Row(init, 0, 16), Row(init, 0, 16));
  EXPECT_EQ(Row(init, ~Key{0}, 16), Row(init, ~Key{0}, 16));
  EXPECT_NE(Row(init, 1, 16), Row(init, 2, 16));
  InitializerOptions other = init;
  other.seed = 10;
  EXPECT_NE(Row(init, 1, 16), Row(other, 1, 16));
  // Element i does not depend on the width.
  auto wide = Row(init, 5, 32);
  auto narrow = Row(init, 5, 8);
  EXPECT_TRUE(std::equal(narrow.begin(), narrow.begin() + 8, wide.begin()));
  // Optimizer state follows the weights.
  EXPECT_EQ(narrow[8], 0.5f);
  EXPECT_EQ(narrow[15], 0.5f);
}

TEST(InitializerTest, Distributions) {
  for (Initializer kind : {Initializer::kZeros, Initializer::kUniform, Initializer::kNormal}) {
    InitializerOptions init;
    init.kind = kind;
    init.scale = 0.1f;
    double sum = 0, sum_sq = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
      const float v = InitValue(init, static_cast<Key>(i) * 7, i % 64);
      if (kind == Initializer::kUniform) {
        ASSERT_GE(v, -0.1f);
        ASSERT_LT(v, 0.1f);
      }
      sum += v;
      sum_sq += static_cast<double>(v) * v;
    }
    const double mean = sum / n, var = sum_sq / n - mean * mean;
    EXPECT_NEAR(mean, 0.0, 0.002);
    const double want_var = kind == Initializer::kZeros     ? 0.0
                            : kind == Initializer::kUniform ? 0.01 / 3
                                                            : 0.01;
    EXPECT_NEAR(var, want_var, want_var * 0.03 + 1e-12) << static_cast<int>(kind);
  }
}

}  // namespace
}  // namespace strata::kernels
