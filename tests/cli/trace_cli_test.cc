// strata-test-labels: integration
// strata-test-timeout: 120
//
// `strata trace gen` and `trace import` on the command line: a value out of
// range in a list option (--cardinalities, --exponent, --hotness) or an
// empty list is a usage error (one line, code 2, no trace written); before,
// range errors exited 1 and `--cardinalities ''` quietly used the preset. An
// import whose --out is its input is refused and the input kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <initializer_list>
#include <utility>

#include "tests/cli/cli_runner.h"
#include "tests/trace/test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::bench {
namespace {

using testing::RunCli;

class TraceCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(std::filesystem::exists(testing::Cli())) << "not built"; }

  strata::testing::ScratchDir dir_;
};

TEST_F(TraceCliTest, GenListOptionsOutOfRangeOrEmptyAreUsageErrors) {
  const std::string trace = dir_.File("t.trace");
  const std::string gen = "trace gen --out " + trace + " --batches 2 --batch-size 4 ";
  for (auto [flags, why] : std::initializer_list<std::pair<const char*, const char*>>{
           {"--cardinalities ''", "--cardinalities: empty item in ''"},
           {"--cardinalities 10,", "--cardinalities: empty item in '10,'"},
           {"--cardinalities 10,0", "--cardinalities: '0' is not in [1, "},
           {"--cardinalities 10 --exponent 11", "--exponent: '11' is not in [0, 10]"},
           {"--cardinalities 10 --exponent -1", "--exponent: '-1' is not in [0, 10]"},
           {"--cardinalities 10,20 --exponent 1,x", "--exponent: 'x' is not a finite number"},
           {"--cardinalities 10 --hotness 0", "--hotness: '0' is not in [1, 1024]"},
           {"--cardinalities 10 --hotness 1025", "--hotness: '1025' is not in [1, 1024]"},
           // Counts that do not fit together: usage errors too.
           {"--cardinalities 10 --exponent 1,1", "--exponent: give one value or one per table (1)"},
           {"--cardinalities 10,20,30 --hotness 1,2", "--hotness: give one value or one per table"},
           {"--preset nope", "unknown preset"}}) {
    SCOPED_TRACE(flags);
    std::string out;
    EXPECT_EQ(RunCli(gen + flags, &out, /*timeout_s=*/30), 2) << out;
    EXPECT_EQ(out.rfind("strata trace gen: ", 0), 0u) << out;
    EXPECT_NE(out.find(why), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
    EXPECT_FALSE(std::filesystem::exists(trace));
  }
  std::string out;
  EXPECT_EQ(RunCli(gen + "--cardinalities 10,20 --exponent 0,1.5 --hotness 1,2", &out), 0) << out;
  EXPECT_EQ(RunCli("trace gen --help", &out), 0) << out;
  EXPECT_NE(out.find("--exponent TEXT:list in [0, 10]"), std::string::npos) << out;
  EXPECT_NE(out.find("or mlperf"), std::string::npos) << out;
}

TEST_F(TraceCliTest, ImportOntoItsInputIsRefusedAndTheInputKept) {
  const std::string input = dir_.File("keys.txt");
  const std::string text = "1 2 3\n4 5\n";
  trace::testing::WriteText(input, text);
  std::filesystem::create_hard_link(input, dir_.File("hard"));
  std::string out;
  for (const std::string& target : {input, dir_.File("./keys.txt"), dir_.File("hard")}) {
    EXPECT_EQ(RunCli("trace import --format lines " + input + " --out " + target, &out), 1) << out;
    EXPECT_NE(out.find("--out " + target + ": is the input file " + input), std::string::npos)
        << out;
  }
  const std::vector<char> bytes = trace::testing::ReadBytes(input);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), text);
}

}  // namespace
}  // namespace strata::bench
