// strata-test-labels: unit
// ScratchDir: a fresh directory named after its test, removed with all it
// holds at the end, whether the test passed or failed; a failed test's kept
// (and its path printed) only when STRATA_KEEP_TEST_DIRS is set.
#include "tests/util/scratch_dir.h"

#include <gtest/gtest.h>
#include <stdio.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace strata::testing {
namespace {

constexpr char kChildEnv[] = "STRATA_SCRATCH_DIR_CHILD";

TEST(ScratchDirTest, FreshDirectoryNamedAfterTheTestRemovedWithItsContent) {
  std::string path;
  {
    ScratchDir dir;
    path = dir.path();
    ASSERT_TRUE(std::filesystem::is_directory(path));
    EXPECT_TRUE(std::filesystem::is_empty(path));
    EXPECT_EQ(path.rfind(::testing::TempDir(), 0), 0u) << path;
    EXPECT_NE(path.find("ScratchDirTest.FreshDirectoryNamedAfterTheTest"), std::string::npos)
        << path;
    EXPECT_EQ(dir.File("a/b"), path + "/a/b");
    ScratchDir other;
    EXPECT_NE(other.path(), path);
    std::filesystem::create_directories(dir.File("a/b"));
    std::ofstream(dir.File("a/b/c")) << "data";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

// Runs only as the child of FailedTestsDirectoryIsRemovedUnlessKept: fails,
// printing its directory's path.
TEST(ScratchDirTest, ChildFails) {
  if (std::getenv(kChildEnv) == nullptr) GTEST_SKIP() << "runs only as a child process";
  ScratchDir dir;
  std::ofstream(dir.File("f")) << "data";
  ADD_FAILURE() << "path=" << dir.path() << "=";
}

// Runs ChildFails in a child process (with STRATA_KEEP_TEST_DIRS set when
// `keep`); returns its directory's path, "" when it printed none.
std::string FailingChildDirectory(bool keep, std::string* output) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string command = std::string(kChildEnv) +
                              "=1 STRATA_KEEP_TEST_DIRS=" + (keep ? "1 " : " ") + self +
                              " --gtest_filter=ScratchDirTest.ChildFails 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), pipe)) > 0;) output->append(buf, n);
  EXPECT_NE(::pclose(pipe), 0) << "the child test should fail:\n" << *output;
  const size_t begin = output->find("path=");
  const size_t end = output->find('=', begin + 5);
  return begin == std::string::npos || end == std::string::npos
             ? ""
             : output->substr(begin + 5, end - begin - 5);
}

TEST(ScratchDirTest, FailedTestsDirectoryIsRemovedUnlessKept) {
  std::string output;
  std::string path = FailingChildDirectory(/*keep=*/false, &output);
  ASSERT_FALSE(path.empty()) << output;
  EXPECT_FALSE(std::filesystem::exists(path)) << output;
  EXPECT_EQ(output.find("ScratchDir: kept"), std::string::npos) << output;

  output.clear();
  path = FailingChildDirectory(/*keep=*/true, &output);
  ASSERT_FALSE(path.empty()) << output;
  EXPECT_TRUE(std::filesystem::exists(path + "/f")) << output;
  EXPECT_NE(output.find("ScratchDir: kept " + path), std::string::npos) << output;
  std::filesystem::remove_all(path);
}

}  // namespace
}  // namespace strata::testing
