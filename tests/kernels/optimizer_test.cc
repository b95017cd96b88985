// Each fused optimizer against an independent float64 reference on random
// data: several steps, every element within 1e-6 relative error.
#include "kernels/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace strata::kernels {
namespace {

// Float64 reference of one step; state layout as in optimizer.h.
void ReferenceStep(const OptimizerOptions& o, uint32_t dim, std::vector<double>& row,
                   const std::vector<double>& g) {
  double* w = row.data();
  double* st = row.data() + dim;
  const double lr = o.learning_rate, eps = o.epsilon;
  switch (o.kind) {
    case Optimizer::kSgd:
      for (uint32_t i = 0; i < dim; ++i) w[i] -= lr * g[i];
      break;
    case Optimizer::kAdagrad:
      for (uint32_t i = 0; i < dim; ++i) {
        st[i] += g[i] * g[i];
        w[i] -= lr * g[i] / (std::sqrt(st[i]) + eps);
      }
      break;
    case Optimizer::kRowwiseAdagrad: {
      double mean = 0;
      for (uint32_t i = 0; i < dim; ++i) mean += g[i] * g[i];
      st[0] += mean / dim;
      for (uint32_t i = 0; i < dim; ++i) w[i] -= lr * g[i] / (std::sqrt(st[0]) + eps);
      break;
    }
    case Optimizer::kAdam: {
      const double b1 = o.beta1, b2 = o.beta2;
      const double t = st[2 * dim] += 1;
      for (uint32_t i = 0; i < dim; ++i) {
        double& m = st[i];
        double& v = st[dim + i];
        m = b1 * m + (1 - b1) * g[i];
        v = b2 * v + (1 - b2) * g[i] * g[i];
        const double mh = m / (1 - std::pow(b1, t)), vh = v / (1 - std::pow(b2, t));
        w[i] -= lr * mh / (std::sqrt(vh) + eps);
      }
      break;
    }
    case Optimizer::kFtrl: {
      const double a = o.ftrl_alpha, b = o.ftrl_beta, l1 = o.ftrl_l1, l2 = o.ftrl_l2;
      for (uint32_t i = 0; i < dim; ++i) {
        double& z = st[i];
        double& n = st[dim + i];
        const double n_new = n + g[i] * g[i];
        z += g[i] - (std::sqrt(n_new) - std::sqrt(n)) / a * w[i];
        n = n_new;
        w[i] = std::fabs(z) <= l1 ? 0.0 : -(z - (z < 0 ? -l1 : l1)) / ((b + std::sqrt(n)) / a + l2);
      }
      break;
    }
  }
}

class OptimizerTest : public ::testing::TestWithParam<Optimizer> {};

TEST_P(OptimizerTest, MatchesFloat64Reference) {
  OptimizerOptions o;
  o.kind = GetParam();
  o.learning_rate = 0.05f;
  o.initial_accumulator = 0.1f;
  o.ftrl_l1 = 0.001f;
  o.ftrl_l2 = 0.01f;
  const uint32_t dim = 32;
  const uint32_t rf = dim + StateFloats(o.kind, dim);
  std::mt19937_64 rng(static_cast<uint64_t>(o.kind) + 5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  double worst = 0;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> row(rf);
    for (uint32_t i = 0; i < dim; ++i) row[i] = u(rng);
    InitOptimizerState(o, dim, row.data());
    for (int step = 0; step < 5; ++step) {
      // Each step starts the reference from the float row, so the error
      // measured is the step's own rounding, not an accumulation of them.
      const std::vector<float> before = row;
      std::vector<double> ref(row.begin(), row.end());
      std::vector<float> g(dim);
      for (float& x : g) x = u(rng);
      ApplyOptimizer(o, dim, row.data(), g.data());
      ReferenceStep(o, dim, ref, std::vector<double>(g.begin(), g.end()));
      for (uint32_t i = 0; i < rf; ++i) {
        // Relative to the larger of the value before and after the step: an
        // update that cancels to ~0 is judged against its operands' size.
        // FTRL's z = z + g - sigma * w may cancel: its operands are of size |g|.
        double operand = 1e-30;
        if (o.kind == Optimizer::kFtrl && i >= dim && i < 2 * dim) operand = std::fabs(g[i - dim]);
        const double scale = std::max({std::fabs(ref[i]), std::fabs(double{before[i]}), operand});
        const double rel = std::fabs(row[i] - ref[i]) / scale;
        worst = std::max(worst, rel);
        ASSERT_LE(rel, 1e-6) << OptimizerName(o.kind) << " trial " << trial << " step " << step
                             << " element " << i << ": " << row[i] << " vs " << ref[i];
      }
    }
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(AllOptimizers, OptimizerTest,
                         ::testing::Values(Optimizer::kSgd, Optimizer::kAdagrad,
                                           Optimizer::kRowwiseAdagrad, Optimizer::kAdam,
                                           Optimizer::kFtrl),
                         [](const auto& info) { return std::string(OptimizerName(info.param)); });

TEST(OptimizerStateTest, StateFloatsAndInitialState) {
  EXPECT_EQ(StateFloats(Optimizer::kSgd, 8), 0u);
  EXPECT_EQ(StateFloats(Optimizer::kAdagrad, 8), 8u);
  EXPECT_EQ(StateFloats(Optimizer::kRowwiseAdagrad, 8), 1u);
  EXPECT_EQ(StateFloats(Optimizer::kAdam, 8), 17u);
  EXPECT_EQ(StateFloats(Optimizer::kFtrl, 8), 16u);
  OptimizerOptions o;
  o.kind = Optimizer::kFtrl;
  o.initial_accumulator = 0.25f;
  std::vector<float> row(2 + 4, -1.0f);
  InitOptimizerState(o, 2, row.data());
  EXPECT_EQ(row, (std::vector<float>{-1, -1, 0, 0, 0.25f, 0.25f}));
}

TEST(OptimizerStateTest, AdamKeepsItsStepInTheRow) {
  OptimizerOptions o;
  o.kind = Optimizer::kAdam;
  std::vector<float> row(1 + 3, 0.0f);
  const float g = 0.5f;
  ApplyOptimizer(o, 1, row.data(), &g);
  ApplyOptimizer(o, 1, row.data(), &g);
  EXPECT_EQ(row[3], 2.0f);
  // A constant gradient: the bias-corrected step is lr * g / |g| each time.
  EXPECT_NEAR(row[0], -2 * o.learning_rate, 1e-6);
}

}  // namespace
}  // namespace strata::kernels
