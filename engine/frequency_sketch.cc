#include "engine/frequency_sketch.h"

#include <algorithm>

#include "base/hash.h"

namespace strata::engine {

FrequencySketch::FrequencySketch(uint64_t width) {
  uint64_t w = 64;
  while (w < width && w < (uint64_t{1} << 26)) w <<= 1;
  mask_ = w - 1;
  sample_ = 10 * w;
  counters_.assign(kRows * w, 0);
}

uint64_t FrequencySketch::Index(Key key, int row) const {
  // Four independent positions from one 64-bit mix and a per-row seed.
  uint64_t h = MixMurmur64(key + 0x9e3779b97f4a7c15ull * uint64_t(row + 1));
  return uint64_t(row) * (mask_ + 1) + (h & mask_);
}

void FrequencySketch::Add(std::span<const Key> keys) {
  for (Key key : keys) {
    // Conservative update: raise only the counters at the current minimum.
    uint32_t low = Estimate(key);
    if (low >= kCounterMax) continue;
    for (int r = 0; r < kRows; ++r) {
      uint16_t& c = counters_[Index(key, r)];
      if (c == low) ++c;
    }
    if (++added_ >= sample_) Age();
  }
}

uint32_t FrequencySketch::Estimate(Key key) const {
  uint32_t low = kCounterMax;
  for (int r = 0; r < kRows; ++r) low = std::min<uint32_t>(low, counters_[Index(key, r)]);
  return low;
}

void FrequencySketch::Age() {
  for (uint16_t& c : counters_) c >>= 1;
  added_ /= 2;
}

}  // namespace strata::engine
