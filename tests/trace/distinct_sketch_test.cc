// strata-test-labels: unit
// DistinctSketch: exact below 1024 distinct keys whatever the repeats,
// within 10% above (its error is about 3%), deterministic.
#include "trace/distinct_sketch.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata::trace {
namespace {

TEST(DistinctSketchTest, ExactBelowItsSizeAndCloseAbove) {
  DistinctSketch small;
  EXPECT_EQ(small.Estimate(), 0u);
  for (int round = 0; round < 3; ++round) {
    for (Key k = 0; k < 1000; ++k) small.Add(k * 7919);
  }
  EXPECT_EQ(small.Estimate(), 1000u);

  for (const uint64_t n : {uint64_t{5000}, uint64_t{200000}, uint64_t{2000000}}) {
    DistinctSketch a, b;
    for (uint64_t i = 0; i < n; ++i) {
      a.Add(i);
      a.Add(i);  // repeats do not count
      b.Add(n - 1 - i);
    }
    const double estimate = double(a.Estimate());
    EXPECT_LT(std::abs(estimate - double(n)) / double(n), 0.1) << n << " keys: " << estimate;
    EXPECT_EQ(a.Estimate(), b.Estimate()) << "the order of the keys changed the estimate";
  }
}

}  // namespace
}  // namespace strata::trace
