// FrequencySketch: approximate access counts of keys in fixed memory (a
// count-min sketch: 4 rows of 16-bit counters, the estimate is the smallest
// of a key's 4 counters). Counters are halved every `sample` increments, so
// counts follow a drifting hot set (TinyLFU's aging).
//
// Used by the engine's frequency-aware fallback policy (FallbackPolicy::kLfu):
// rows nobody declared an intent for are evicted least frequent first.
//
// Thread safety: none; the engine holds the table's lock.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/types.h"

namespace strata::engine {

class FrequencySketch {
 public:
  // `width`: counters per row, rounded up to a power of two (>= 64).
  explicit FrequencySketch(uint64_t width);

  // Counts one access of each key; returns nothing (see Estimate).
  void Add(std::span<const Key> keys);
  // Estimated accesses of `key` since it was last aged (never below the truth
  // before aging; may be above it by collisions).
  uint32_t Estimate(Key key) const;
  uint64_t width() const { return mask_ + 1; }

 private:
  static constexpr int kRows = 4;
  static constexpr uint32_t kCounterMax = 0xffff;
  uint64_t Index(Key key, int row) const;
  void Age();

  uint64_t mask_;
  uint64_t sample_;                 // increments between agings: 10 x width
  uint64_t added_ = 0;              // increments since the last aging
  std::vector<uint16_t> counters_;  // kRows x width
};

}  // namespace strata::engine
