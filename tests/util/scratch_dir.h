// ScratchDir: a fresh directory for one test, under ::testing::TempDir()
// ($TEST_TMPDIR, else /tmp), named after the running test. The destructor
// removes it and everything in it, whether the test passed or failed, so
// test runs leave nothing behind.
//
// To look at what a failing test left, run it with STRATA_KEEP_TEST_DIRS=1:
// the directories of failed tests are then kept and their paths printed.
//
// Thread safety: a value owned by one test; path() and File() are const.
#pragma once

#include <string>

namespace strata::testing {

class ScratchDir {
 public:
  // Creates the directory; a failure to create it aborts the test binary
  // (nothing a test could do with a path that does not exist).
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // The directory, without a trailing '/'.
  const std::string& path() const { return path_; }
  // `name` (which may contain '/') inside the directory.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace strata::testing
