#include "engine/action_timing.h"

#include <algorithm>
#include <cmath>

#include "base/assert.h"

namespace strata::engine {

namespace {
// Above this rate exp(-lambda) nears underflow; switch to the normal tail.
constexpr double kExactLambdaMax = 500.0;
}  // namespace

int64_t PoissonQuantile(double lambda, double p) {
  STRATA_ASSERT(lambda >= 0.0, "PoissonQuantile: negative rate");
  STRATA_ASSERT(p > 0.0 && p < 1.0, "PoissonQuantile: p outside (0, 1)");
  if (lambda == 0.0) return 0;
  if (lambda <= kExactLambdaMax) {
    double pmf = std::exp(-lambda);
    double cdf = pmf;
    int64_t k = 0;
    // The loop ends: cdf reaches p well before k = lambda + 40 sqrt(lambda) + 40.
    const int64_t k_max = static_cast<int64_t>(lambda + 40.0 * std::sqrt(lambda) + 40.0);
    while (cdf < p && k < k_max) {
      ++k;
      pmf *= lambda / static_cast<double>(k);
      cdf += pmf;
    }
    return k;
  }
  // Normal approximation with continuity correction, rounded up, plus one
  // standard deviation of margin: a soft upper bound is what is asked for.
  // z for p via a rational approximation of the inverse normal CDF (Acklam's
  // tail formula is enough for p close to 1).
  const double q = std::sqrt(-2.0 * std::log(1.0 - p));
  const double z = q - (2.515517 + 0.802853 * q + 0.010328 * q * q) /
                           (1.0 + 1.432788 * q + 0.189269 * q * q + 0.001308 * q * q * q);
  const double sd = std::sqrt(lambda);
  return static_cast<int64_t>(std::ceil(lambda + (z + 1.0) * sd + 0.5));
}

int64_t RateEstimator::Update(Clock clock_now) {
  double delta = 0.0;
  if (started_ && clock_now > last_clock_) delta = static_cast<double>(clock_now - last_clock_);
  if (delta > 0.0) lambda_ = (1.0 - alpha_) * lambda_ + alpha_ * delta;
  last_clock_ = clock_now;
  started_ = true;
  return PoissonQuantile(2.0 * std::max(lambda_, delta), quantile_);
}

}  // namespace strata::engine
