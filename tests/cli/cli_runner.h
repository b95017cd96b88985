// Runs the built `strata` binary from a test: where it is ($STRATA_BINARY_DIR
// or the build tree the test belongs to), one command's exit code and
// output, and a fixture with a trace made by `strata trace gen`. Test code
// only.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/util/scratch_dir.h"

namespace strata::bench::testing {

inline std::string Cli() {
  const char* bin = std::getenv("STRATA_BINARY_DIR");
  return std::string(bin != nullptr ? bin : STRATA_TEST_BINARY_DIR) + "/bin/strata";
}

// Runs `strata ARGS` under `timeout` (so a command that hangs fails the test
// instead of the suite); its exit code (124: timed out) and its stdout and
// stderr together.
inline int RunCli(const std::string& args, std::string* out, int timeout_s = 300) {
  const std::string cmd =
      "timeout " + std::to_string(timeout_s) + " " + Cli() + " " + args + " 2>&1";
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  out->clear();
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int rc = ::pclose(p);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// A temporary directory holding `trace_`, generated with `gen_flags`.
class CliTraceTest : public ::testing::Test {
 protected:
  explicit CliTraceTest(std::string gen_flags) : gen_flags_(std::move(gen_flags)) {}

  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(Cli())) << Cli() << " not built";
    trace_ = dir_.File("t.trace");
    std::string out;
    ASSERT_EQ(RunCli("trace gen --out " + trace_ + " " + gen_flags_, &out), 0) << out;
  }

  const std::string gen_flags_;
  strata::testing::ScratchDir dir_;
  std::string trace_;
};

}  // namespace strata::bench::testing
