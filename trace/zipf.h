// Deterministic random numbers for the workload generator: a Zipf sampler
// over ranks 1..n, driven by splitmix64 (base/hash.h), by rejection-inversion
// (Hörmann and Derflinger, "Rejection-inversion to generate variates from
// monotone discrete distributions", 1996): O(1) memory and time per sample,
// whatever n, so 40M-key tables cost nothing to set up.
//
// Thread safety: values; one thread per object.
#pragma once

#include <cstdint>

#include "base/hash.h"

namespace strata::trace {

// P(rank = k) proportional to k^-exponent for k in 1..n. exponent 0 is
// uniform. REQUIRES: n >= 1, exponent >= 0.
class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double exponent);
  uint64_t Sample(SplitMix64& rng) const;  // in [1, n]

  uint64_t n() const { return n_; }
  double exponent() const { return exponent_; }

 private:
  double H(double x) const;
  double HInverse(double x) const;
  double h(double x) const;

  uint64_t n_;
  double exponent_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_;
};

}  // namespace strata::trace
