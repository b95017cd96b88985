#include "examples/train/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace strata::train {
namespace {

// AUC by counting every (positive, negative) pair; ties count one half.
double BruteForceAuc(const std::vector<float>& s, const std::vector<float>& y) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (size_t j = 0; j < s.size(); ++j) {
      if (y[i] == 1 && y[j] == 0) {
        pairs += 1;
        wins += s[i] > s[j] ? 1.0 : (s[i] == s[j] ? 0.5 : 0.0);
      }
    }
  }
  return wins / pairs;
}

TEST(MetricsTest, AucMatchesPairCountWithTies) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> s(200), y(200);
    for (size_t i = 0; i < s.size(); ++i) {
      s[i] = static_cast<float>(rng() % 17);  // many ties
      y[i] = (rng() % 3 == 0) ? 1.0f : 0.0f;
    }
    y[0] = 1;
    y[1] = 0;
    EXPECT_NEAR(RocAuc(s, y), BruteForceAuc(s, y), 1e-12) << "trial " << trial;
  }
}

TEST(MetricsTest, AucEdges) {
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{1, 2, 3, 4}, std::vector<float>{0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{4, 3, 2, 1}, std::vector<float>{0, 0, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{5, 5, 5, 5}, std::vector<float>{0, 1, 0, 1}), 0.5);
  EXPECT_TRUE(std::isnan(RocAuc(std::vector<float>{1, 2}, std::vector<float>{1, 1})));
}

TEST(MetricsTest, LogLossKnownValues) {
  EXPECT_NEAR(MeanLogLoss(std::vector<float>{0}, std::vector<float>{1}), std::log(2.0), 1e-12);
  // z = 2: y = 1 -> log(1 + e^-2); y = 0 -> log(1 + e^2).
  EXPECT_NEAR(MeanLogLoss(std::vector<float>{2, 2}, std::vector<float>{1, 0}),
              (std::log1p(std::exp(-2.0)) + std::log1p(std::exp(2.0))) / 2, 1e-12);
  // Far logits stay finite.
  EXPECT_NEAR(MeanLogLoss(std::vector<float>{-1000}, std::vector<float>{1}), 1000.0, 1e-9);
  EXPECT_NEAR(MeanLogLoss(std::vector<float>{1000}, std::vector<float>{1}), 0.0, 1e-12);
}

}  // namespace
}  // namespace strata::train
