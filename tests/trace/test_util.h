// Helpers shared by the trace tests: whole-file byte access for corruption
// tests. Scratch directories: tests/util/scratch_dir.h.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/util/scratch_dir.h"

namespace strata::trace::testing {

// The former name of strata::testing::ScratchDir, with Path() for File();
// kept for tests/bench/replay_driver_test.cc until it uses ScratchDir.
class TempDir : public strata::testing::ScratchDir {
 public:
  std::string Path(const std::string& name) const { return File(name); }
};

inline std::vector<char> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

inline void WriteBytes(const std::string& path, const std::vector<char>& bytes, size_t len) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(len));
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace strata::trace::testing
