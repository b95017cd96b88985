// AdaPM's adaptive action timing (adapm-intent-signaling.txt, 4.2, Alg. 1).
//
// Per worker, the planner estimates how many clocks the worker advances per
// planner round, lambda <- (1-a)*lambda + a*delta only when delta > 0, and
// acts on an intent when start < clock + PoissonQuantile(2*max(lambda, delta), p).
// Acting a little early is cheap; acting late is a stall.
//
// Thread safety: RateEstimator is owned by the planner thread; not shared.
#pragma once

#include <cstdint>

#include "strata/types.h"

namespace strata::engine {

// Smallest k with P[X <= k] >= p for X ~ Poisson(lambda). REQUIRES: lambda >= 0,
// 0 < p < 1. Exact summation for moderate lambda, a normal approximation with
// a safety margin above (the answer only needs to be a soft upper bound).
int64_t PoissonQuantile(double lambda, double p);

class RateEstimator {
 public:
  RateEstimator(double alpha, double quantile, double lambda0)
      : alpha_(alpha), quantile_(quantile), lambda_(lambda0) {}

  // Called once per planner round with the worker's clock at the round's
  // start; returns the horizon: act on intents with start < clock + horizon.
  int64_t Update(Clock clock_now);

  double lambda() const { return lambda_; }

 private:
  double alpha_;
  double quantile_;
  double lambda_;
  Clock last_clock_ = 0;
  bool started_ = false;
};

}  // namespace strata::engine
