// Deterministic per-key initializer of fresh rows. Element i of key k's
// embedding is a function of (seed, k, i) only: a counter-based hash, so the
// value does not depend on insertion order, batch, table capacity or runner.
//   zeros  : 0
//   uniform: scale * (2u - 1), u = top 24 bits of the hash / 2^24 (exact)
//   normal : scale * Box-Muller(u1, u2) computed in double, rounded once
// Uniform and zeros are bit-identical on GPU and host; normal uses the
// platform's log/cos and may differ in the last bit (docs/device-table.md).
//
// Thread safety: pure functions.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/hash.h"
#include "kernels/hd.h"
#include "kernels/optimizer.h"
#include "strata/types.h"

namespace strata::kernels {

struct InitializerOptions {
  Initializer kind = Initializer::kUniform;
  float scale = 0.01f;  // uniform: half-width; normal: standard deviation
  uint64_t seed = 0;    // the engine passes a hash of the table id
};

// 64 random bits for element `index` of `key` under `seed`.
STRATA_HD inline uint64_t InitBits(uint64_t seed, Key key, uint32_t index) {
  uint64_t x = MixMurmur64(seed ^ 0x9e3779b97f4a7c15ULL);
  x = MixMurmur64(x ^ key);
  return MixMurmur64(x + (static_cast<uint64_t>(index) + 1) * 0xbf58476d1ce4e5b9ULL);
}

// Initial value of element `index` of `key`'s embedding.
STRATA_HD inline float InitValue(const InitializerOptions& init, Key key, uint32_t index) {
  switch (init.kind) {
    case Initializer::kZeros:
      return 0.0f;
    case Initializer::kUniform: {
      const uint64_t bits = InitBits(init.seed, key, index);
      const float u = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // [0, 1)
      return init.scale * (2.0f * u - 1.0f);
    }
    case Initializer::kNormal: {
      const uint64_t bits = InitBits(init.seed, key, index);
      const double u1 = (static_cast<double>(bits >> 32) + 1.0) * (1.0 / 4294967296.0);  // (0,1]
      const double u2 = static_cast<double>(bits & 0xffffffffULL) * (1.0 / 4294967296.0);
      const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
      return static_cast<float>(static_cast<double>(init.scale) * z);
    }
  }
  return 0.0f;
}

// Writes a complete fresh row for `key`: dim initial weights followed by the
// optimizer's initial state. REQUIRES: row holds dim + StateFloats floats.
STRATA_HD inline void InitRow(const InitializerOptions& init, const OptimizerOptions& opt, Key key,
                              uint32_t dim, float* row) {
  for (uint32_t i = 0; i < dim; ++i) row[i] = InitValue(init, key, i);
  InitOptimizerState(opt, dim, row);
}

}  // namespace strata::kernels
