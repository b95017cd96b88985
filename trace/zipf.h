// Deterministic random numbers for the workload generator: a SplitMix64
// stream and a Zipf sampler over ranks 1..n by rejection-inversion
// (Hörmann and Derflinger, "Rejection-inversion to generate variates from
// monotone discrete distributions", 1996): O(1) memory and time per sample,
// whatever n, so 40M-key tables cost nothing to set up.
//
// Thread safety: values; one thread per object.
#pragma once

#include <cstdint>

namespace strata::trace {

// SplitMix64: tiny, fast, fully determined by its seed.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// The SplitMix64 finalizer: a bijection of 64-bit values (ids to keys).
inline uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

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
