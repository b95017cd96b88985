// Helpers shared by the io tests: a scratch directory removed at the end of
// the test, and a deterministic byte pattern to fill and check files with.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace strata::io::testing {

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = ::testing::TempDir() + "strata_io_XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << tmpl;
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

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
