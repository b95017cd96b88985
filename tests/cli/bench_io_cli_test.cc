// strata-test-labels: integration
// strata-test-timeout: 120
//
// `strata bench io` writes only a file it creates (or one --overwrite hands
// it), checks the free space before it fills a new one, and counts the fill
// in --seconds. Before, it rewrote an existing shorter file from offset 0
// even with --mode read, and `--size-gib 1048576` wrote until it was killed.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/cli/cli_runner.h"
#include "tests/trace/test_util.h"

namespace strata::bench {
namespace {

using testing::RunCli;
using trace::testing::ReadBytes;
using trace::testing::WriteText;

// 1 MiB in GiB: the command rounds to whole blocks, so this is exact.
constexpr const char* kOneMibInGib = "0.0009765625";

class BenchIoCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::exists(testing::Cli())) << "not built"; }

  // `bench io` on `file` for a moment, page-cache I/O (the scratch directory
  // may not take O_DIRECT).
  int BenchIo(const std::string& file, const std::string& flags, std::string* out) {
    return RunCli("bench io --file " + file + " --buffered --block 4096 --depth 4 " + flags, out,
                  /*timeout_s=*/60);
  }

  strata::testing::ScratchDir dir_;
};

TEST_F(BenchIoCliTest, AnExistingShorterFileIsNotWrittenInAnyMode) {
  const std::string file = dir_.File("short.dat");
  const std::string text(4096, 'k');
  WriteText(file, text);
  for (const char* mode : {"read", "randread", "write", "randwrite"}) {
    SCOPED_TRACE(mode);
    std::string out;
    EXPECT_EQ(BenchIo(file, std::string("--size-gib 0.001 --seconds 0.05 --mode ") + mode, &out), 1)
        << out;
    EXPECT_NE(out.find("--file " + file + " exists with 4096 bytes, fewer than --size-gib 0.001"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find("--overwrite"), std::string::npos) << out;
    const std::vector<char> bytes = ReadBytes(file);
    EXPECT_EQ(std::string(bytes.begin(), bytes.end()), text);
  }
}

TEST_F(BenchIoCliTest, WriteModesNeedOverwriteForAnExistingFile) {
  const std::string file = dir_.File("full.dat");
  const std::string text(1 << 20, 'k');
  WriteText(file, text);
  const std::string size = std::string("--size-gib ") + kOneMibInGib + " --seconds 0.05";
  std::string out;
  // Reading it is fine, and changes nothing.
  EXPECT_EQ(BenchIo(file, size + " --mode randread", &out), 0) << out;
  for (const char* mode : {"write", "randwrite"}) {
    EXPECT_EQ(BenchIo(file, size + " --mode " + mode, &out), 1) << out;
    EXPECT_NE(out.find(std::string("--mode ") + mode + " would write over --file " + file),
              std::string::npos)
        << out;
  }
  std::vector<char> bytes = ReadBytes(file);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), text);
  // With --overwrite it is written.
  EXPECT_EQ(BenchIo(file, size + " --mode randwrite --overwrite", &out), 0) << out;
  bytes = ReadBytes(file);
  EXPECT_NE(std::string(bytes.begin(), bytes.end()), text);
  // The help says so.
  EXPECT_EQ(RunCli("bench io --help", &out), 0) << out;
  EXPECT_NE(out.find("--overwrite"), std::string::npos) << out;
  EXPECT_NE(out.find("fill included"), std::string::npos) << out;
}

TEST_F(BenchIoCliTest, AFileLargerThanTheFreeSpaceIsRefusedBeforeItIsCreated) {
  const std::string file = dir_.File("huge.dat");
  std::string out;
  EXPECT_EQ(BenchIo(file, "--size-gib 1048576 --seconds 0.5", &out), 1) << out;
  EXPECT_NE(out.find("--file " + file + ": --size-gib 1048576 (1125899906842624 bytes) needs " +
                     "1125899906842624 bytes more and its file system has "),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(" bytes free"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(file));
}

// A fill of 256 MiB takes far more than 1 ms (256 writes of 1 MiB): it runs
// out of --seconds, and the file it made is removed.
TEST_F(BenchIoCliTest, TheFillCountsInTheTimeLimit) {
  const std::string file = dir_.File("slow.dat");
  std::string out;
  EXPECT_EQ(BenchIo(file, "--size-gib 0.25 --seconds 0.001 --mode randread", &out), 1) << out;
  EXPECT_NE(out.find("filling --file " + file + " to 0.25 GiB took all of --seconds"),
            std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(file));
}

}  // namespace
}  // namespace strata::bench
