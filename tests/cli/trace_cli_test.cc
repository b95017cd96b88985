// strata-test-labels: integration
// strata-test-timeout: 120
//
// `strata trace` commands on the command line: an import whose --out is its
// input (another spelling, a hard link) is refused and the input kept;
// before, the trace replaced it.
#include <gtest/gtest.h>

#include <filesystem>

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
