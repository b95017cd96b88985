// ZipfSampler: rejection-inversion sampling (zipf.h).
#include "trace/zipf.h"

#include <cmath>

#include "base/assert.h"

namespace strata::trace {
namespace {

// log1p(x)/x and expm1(x)/x, accurate near 0 (where both tend to 1).
double Helper1(double x) { return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x / 2 + x * x / 3; }
double Helper2(double x) { return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x / 2 + x * x / 6; }

}  // namespace

ZipfSampler::ZipfSampler(uint64_t n, double exponent) : n_(n), exponent_(exponent) {
  STRATA_ASSERT(n >= 1, "ZipfSampler: n must be at least 1");
  STRATA_ASSERT(exponent >= 0, "ZipfSampler: exponent must be non-negative");
  h_integral_x1_ = H(1.5) - 1.0;
  h_integral_n_ = H(static_cast<double>(n) + 0.5);
  s_ = 2.0 - HInverse(H(2.5) - h(2.0));
}

// h(x) = x^-e; H is its antiderivative with H(1) = 0: (x^(1-e) - 1)/(1-e).
double ZipfSampler::h(double x) const { return std::exp(-exponent_ * std::log(x)); }

double ZipfSampler::H(double x) const {
  const double log_x = std::log(x);
  return Helper2((1.0 - exponent_) * log_x) * log_x;
}

double ZipfSampler::HInverse(double x) const {
  double t = x * (1.0 - exponent_);
  if (t < -1.0) t = -1.0;  // rounding guard: the domain ends at -1
  return std::exp(Helper1(t) * x);
}

uint64_t ZipfSampler::Sample(SplitMix64& rng) const {
  if (n_ == 1) return 1;
  while (true) {
    const double u = h_integral_n_ + rng.NextDouble() * (h_integral_x1_ - h_integral_n_);
    const double x = HInverse(u);
    double k = std::floor(x + 0.5);
    if (k < 1) k = 1;
    if (k > static_cast<double>(n_)) k = static_cast<double>(n_);
    if (k - x <= s_ || u >= H(k + 0.5) - h(k)) return static_cast<uint64_t>(k);
  }
}

}  // namespace strata::trace
