// Bit mixers shared by the modules: bijections on 64-bit values (distinct
// inputs never collide) that spread every input bit over the output.
// constexpr, so the CUDA kernels call them too (--expt-relaxed-constexpr).
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

}  // namespace strata
