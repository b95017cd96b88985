// strata-test-labels: integration
// strata-test-timeout: 300
//
// Numbers on the `strata` command line (cli/cli_util.h): a negative,
// fractional, overflowing or out-of-range value of any numeric option is one
// line naming the command and the option, exit code 2, before the command
// does anything (no file or directory created). CLI11 alone read "-1" into an
// unsigned option as 2^64 - 1: replays that hung, traces that filled the disk.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <utility>

#include "tests/cli/cli_runner.h"
#include "tests/trace/test_util.h"
#include "tests/util/source_files.h"

namespace strata::bench {
namespace {

using testing::RunCli;

class CliNumbersTest : public testing::CliTraceTest {
 protected:
  CliNumbersTest()
      : CliTraceTest("--cardinalities 300,40 --batch-size 16 --batches 8 --workers 1") {}

  // `command_line option value` must fail as a usage error: exit code 2 and
  // one line "strata <command>: <option>: ... '<value>' ...", leaving
  // `untouched` missing.
  void ExpectUsageError(const std::string& command_line, const std::string& command,
                        const std::string& option, const std::string& value,
                        const std::string& untouched) {
    const std::string args = command_line + " " + option + " " + value;
    SCOPED_TRACE(args);
    std::string out;
    const int rc = RunCli(args, &out, /*timeout_s=*/20);
    EXPECT_EQ(rc, 2) << out;
    EXPECT_EQ(out.rfind("strata " + command + ": " + option + ": ", 0), 0u) << out;
    EXPECT_NE(out.find("'" + value + "'"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    if (!untouched.empty()) {
      EXPECT_FALSE(std::filesystem::exists(untouched)) << untouched;
    }
  }

  std::string Replay(const std::string& store) const {
    return "replay " + trace_ + " --dir " + store + " --device-rows 300 --dram-rows 400";
  }
};

TEST_F(CliNumbersTest, ReplayRefusesNegativeAndOutOfRangeValues) {
  const std::string store = dir_.File("store");
  // The first three ran before: a hang, a wrapped tier size, undefined
  // behaviour (an out-of-range cast).
  for (auto [option, value] : std::initializer_list<std::pair<const char*, const char*>>{
           {"--lookahead", "-1"},
           {"--dram-rows", "-1"},
           {"--device-rows", "-5"},
           {"--lookahead", "1025"},
           {"--device-rows", "1099511627777"},
           {"--batches", "18446744073709551616"},
           {"--workers", "2.5"},
           {"--compute-us", "1e3"},
           {"--device-share-growth", "nan"},
           {"--device-share-growth", "-0.5"},
           {"--act-ahead-max", "-1"},
           {"--act-ahead-max", "1025"},
           {"--ssd-format", "3"},
           {"--ssd-format", "two"},
           {"--ssd-index", "full"},
           {"--ssd-range-bits", "13"},
           {"--ssd-range-bits", "-1"},
           {"--dram-shards", "-1"},
           {"--dram-shards", "65"}}) {
    ExpectUsageError(Replay(store), "replay", option, value, store);
  }
  // In range but not a power of two: Store::Open's error, naming the
  // option, before the store's directory is made.
  std::string out;
  EXPECT_EQ(RunCli(Replay(store) + " --dram-shards 3", &out), 1) << out;
  EXPECT_NE(out.find("StoreOptions.dram_shards = 3"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(store));
}

TEST_F(CliNumbersTest, LeadingZerosAreDecimalNotOctal) {
  std::string out;
  ASSERT_EQ(RunCli(Replay(dir_.File("store")) + " --lookahead 010 --dim 4 --json", &out), 0) << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_EQ(j["lookahead"], 10);
}

TEST_F(CliNumbersTest, TraceCommandsRefuseNegativeValues) {
  const std::string out_trace = dir_.File("out.trace");
  const std::string gen = "trace gen --out " + out_trace + " --cardinalities 10";
  ExpectUsageError(gen, "trace gen", "--batches", "-1", out_trace);  // filled the disk before
  ExpectUsageError(gen, "trace gen", "--batch-size", "-4", out_trace);
  ExpectUsageError(gen, "trace gen", "--scale", "-1", out_trace);
  ExpectUsageError(gen, "trace gen", "--seed", "-3", out_trace);
  // Exported every table before; nothing may reach stdout now.
  ExpectUsageError("trace export " + trace_, "trace export", "--table", "-5", "");
  ExpectUsageError("trace opt " + trace_, "trace opt", "--cache-rows", "-1", "");
  ExpectUsageError("trace opt " + trace_ + " --cache-rows 100", "trace opt", "--lookahead", "-2",
                   "");
  const std::string lines = dir_.File("in.txt");
  trace::testing::WriteText(lines, "1 2 3\n");
  ExpectUsageError("trace import --format criteo " + lines + " --out " + out_trace, "trace import",
                   "--batch-size", "-1", out_trace);
}

TEST_F(CliNumbersTest, TrainRefusesNegativeValuesBeforeTouchingItsDirectory) {
  const std::string store = dir_.File("train-store");
  const std::string train = "train " + strata::testing::CriteoSamplePath() + " --dir " + store;
  for (auto [option, value] :
       std::initializer_list<std::pair<const char*, const char*>>{{"--device-rows", "-1"},
                                                                  {"--dram-rows", "-1"},
                                                                  {"--epochs", "-1"},
                                                                  {"--lookahead", "-1"},
                                                                  {"--rows-max", "-1"},
                                                                  {"--validation-fraction", "1"},
                                                                  {"--lr", "inf"}}) {
    ExpectUsageError(train, "train", option, value, store);
  }
}

TEST_F(CliNumbersTest, BenchCommandsRefuseNegativeValuesBeforeCreatingFiles) {
  const std::string file = dir_.File("io.bin");
  ExpectUsageError("bench io --file " + file, "bench io", "--block", "-1", file);
  ExpectUsageError("bench io --file " + file, "bench io", "--size-gib", "-1", file);
  const std::string ssd = dir_.File("ssd");
  ExpectUsageError("bench ssd --dir " + ssd, "bench ssd", "--rows", "-1", ssd);
  ExpectUsageError("bench ssd --dir " + ssd, "bench ssd", "--dim", "-1", ssd);
  ExpectUsageError("bench ssd --dir " + ssd, "bench ssd", "--segment-bytes", "-1", ssd);
  ExpectUsageError("bench ssd --dir " + ssd, "bench ssd", "--segment-bytes", "1024", ssd);
  ExpectUsageError("bench ssd --dir " + ssd, "bench ssd", "--index", "exactly", ssd);
  // A word the command does not know is refused naming it, before any file.
  {
    std::string out;
    EXPECT_NE(RunCli("bench ssd --dir " + ssd + " --format 3 --rows 10", &out), 0) << out;
    EXPECT_NE(out.find("--format '3'"), std::string::npos) << out;
    EXPECT_FALSE(std::filesystem::exists(ssd)) << out;
  }
  ExpectUsageError("bench dram", "bench dram", "--batches", "-1", "");
  // --threads takes a list of counts: every item is checked.
  ExpectUsageError("bench dram", "bench dram", "--threads", "0", "");
  ExpectUsageError("bench dram", "bench dram", "--threads", "-1", "");
  ExpectUsageError("bench dram", "bench dram", "--threads", "1,x", "");
  ExpectUsageError("bench dram", "bench dram", "--shards", "-1", "");
  ExpectUsageError("bench dram", "bench dram", "--shards", "65", "");
  ExpectUsageError("bench table", "bench table", "--capacity", "-1", "");
}

TEST_F(CliNumbersTest, OtherUsageErrorsAreOneLineWithCode2AndHelpIsNot) {
  std::string out;
  EXPECT_EQ(RunCli("replay " + trace_ + " --device-rows 300", &out), 2) << out;
  EXPECT_EQ(out.rfind("strata replay: ", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(RunCli("replay --help", &out), 0) << out;
  EXPECT_NE(out.find("--lookahead"), std::string::npos) << out;
  // A DRAM bench larger than the machine's memory (about 1.1 PB here) is
  // refused before anything is allocated, not killed halfway.
  EXPECT_EQ(RunCli("bench dram --rows 4294967296 --dim 65536", &out, /*timeout_s=*/20), 2) << out;
  EXPECT_EQ(out.rfind("strata bench dram: --rows 4294967296 --dim 65536 needs about ", 0), 0u)
      << out;
  EXPECT_NE(out.find("this machine has"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

}  // namespace
}  // namespace strata::bench
