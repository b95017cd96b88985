// strata-test-labels: unit
#include "engine/action_timing.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata::engine {
namespace {

// Reference: P[X <= k] by summation in long double.
long double PoissonCdf(double lambda, int64_t k) {
  long double pmf = std::exp(-static_cast<long double>(lambda));
  long double cdf = pmf;
  for (int64_t i = 1; i <= k; ++i) {
    pmf *= lambda / static_cast<long double>(i);
    cdf += pmf;
  }
  return cdf;
}

TEST(ActionTimingTest, PoissonQuantileIsSmallestKReachingP) {
  for (double lambda : {0.5, 1.0, 2.0, 10.0, 20.0, 57.3, 200.0}) {
    for (double p : {0.5, 0.9, 0.9999}) {
      int64_t k = PoissonQuantile(lambda, p);
      EXPECT_GE(PoissonCdf(lambda, k), p) << "lambda " << lambda << " p " << p;
      if (k > 0) {
        EXPECT_LT(PoissonCdf(lambda, k - 1), p) << "lambda " << lambda << " p " << p;
      }
    }
  }
}

TEST(ActionTimingTest, KnownValues) {
  // Q(20, 0.9999) = 39: P[X<=38] < 0.9999 <= P[X<=39] = 0.999947 for lambda 20.
  EXPECT_EQ(PoissonQuantile(20.0, 0.9999), 39);
  EXPECT_EQ(PoissonQuantile(0.0, 0.9999), 0);
}

TEST(ActionTimingTest, LargeRatesGiveAnUpperBound) {
  for (double lambda : {600.0, 5000.0, 1e6}) {
    int64_t k = PoissonQuantile(lambda, 0.9999);
    // Exact 0.9999 quantile is about lambda + 3.72 sqrt(lambda); we may exceed it
    // by a margin but must not fall below it.
    EXPECT_GE(static_cast<double>(k), lambda + 3.71 * std::sqrt(lambda));
    EXPECT_LE(static_cast<double>(k), lambda + 5.5 * std::sqrt(lambda) + 2);
  }
}

TEST(ActionTimingTest, EstimatorSmoothsOnlyPositiveDeltas) {
  RateEstimator est(0.1, 0.9999, 10.0);
  est.Update(0);  // first round: no delta
  EXPECT_DOUBLE_EQ(est.lambda(), 10.0);
  est.Update(20);  // delta 20: 0.9*10 + 0.1*20 = 11
  EXPECT_DOUBLE_EQ(est.lambda(), 11.0);
  est.Update(20);  // delta 0: unchanged
  EXPECT_DOUBLE_EQ(est.lambda(), 11.0);
}

TEST(ActionTimingTest, HorizonUsesMaxOfEstimateAndDelta) {
  RateEstimator est(0.1, 0.9999, 10.0);
  EXPECT_EQ(est.Update(0), PoissonQuantile(20.0, 0.9999));
  // A burst of 100 clocks: horizon from 2*max(19, 100) = 200.
  EXPECT_EQ(est.Update(100), PoissonQuantile(200.0, 0.9999));
  // Idle round: delta 0, horizon from 2*lambda = 38.
  EXPECT_EQ(est.Update(100), PoissonQuantile(38.0, 0.9999));
}

}  // namespace
}  // namespace strata::engine
