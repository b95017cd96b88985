// Helpers shared by the io tests: a deterministic byte pattern to fill and
// check files with. Scratch directories: tests/util/scratch_dir.h.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::io::testing {

// The byte stored at `offset` of a pattern file.
inline uint8_t PatternByte(uint64_t offset) {
  uint64_t x = offset * 0x9E3779B97F4A7C15ull;
  return static_cast<uint8_t>((x >> 56) ^ (offset >> 12));
}

inline void FillPattern(uint8_t* buf, uint64_t offset, size_t len) {
  for (size_t i = 0; i < len; ++i) buf[i] = PatternByte(offset + i);
}

inline bool MatchesPattern(const uint8_t* buf, uint64_t offset, size_t len) {
  for (size_t i = 0; i < len; ++i) {
    if (buf[i] != PatternByte(offset + i)) return false;
  }
  return true;
}

}  // namespace strata::io::testing
