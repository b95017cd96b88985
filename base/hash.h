// Bit mixers shared by the modules: bijections on 64-bit values (distinct
// inputs never collide) that spread every input bit over the output, and the
// splitmix64 generator built on one. constexpr, so the CUDA kernels call the
// mixers too (--expt-relaxed-constexpr).
//
// Thread safety: pure functions; a SplitMix64 is a value, one thread at a time.
#pragma once

#include <cstdint>

namespace strata {

// MurmurHash3's 64-bit finalizer (hash tables, sketches).
constexpr uint64_t MixMurmur64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// splitmix64's finalizer. The native SSD format places keys by it: changing
// it changes where rows are stored.
constexpr uint64_t MixSplit64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// splitmix64, the generator: a tiny deterministic stream of 64-bit values,
// the same on every platform, fully determined by its seed. Workload
// generation, fault injection and the examples' shuffles depend on its exact
// output (fixed-seed traces and tests).
class SplitMix64 {
 public:
  constexpr explicit SplitMix64(uint64_t seed) : state_(seed) {}
  constexpr uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ull;
    return MixSplit64(state_);
  }
  // Uniform in [0, 1) with 53 random bits.
  constexpr double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace strata
