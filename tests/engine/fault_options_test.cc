// strata-test-labels: unit
// ParseFaultOptions (strata/options.h, engine/fault_options.cc): the
// command-line spelling of FaultOptions, and CheckFaultOptions at Open.
#include "engine/fault_options.h"

#include <gtest/gtest.h>

namespace strata::engine {
namespace {

TEST(FaultOptionsTest, ParsesEveryKey) {
  auto faults = ParseFaultOptions("eio=0.01,enospc=0.001,delay_us=200,seed=9");
  ASSERT_TRUE(faults.ok()) << faults.status().ToString();
  EXPECT_DOUBLE_EQ(faults->eio_probability, 0.01);
  EXPECT_DOUBLE_EQ(faults->enospc_probability, 0.001);
  EXPECT_EQ(faults->delay_us, 200u);
  EXPECT_EQ(faults->seed, 9u);
  EXPECT_TRUE(faults->enabled());
}

TEST(FaultOptionsTest, EmptyGivesTheDefaults) {
  auto faults = ParseFaultOptions("");
  ASSERT_TRUE(faults.ok());
  EXPECT_FALSE(faults->enabled());
  EXPECT_EQ(faults->seed, FaultOptions{}.seed);
}

TEST(FaultOptionsTest, BadPairsAreNamed) {
  for (const char* bad :
       {"eio=2", "eio=x", "eio", "delay_us=-5", "speed=1", "enospc=", "delay_us=1000001"}) {
    auto faults = ParseFaultOptions(std::string("seed=3,") + bad);
    ASSERT_TRUE(faults.status().IsInvalidArgument()) << bad;
    EXPECT_NE(faults.status().message().find("'" + std::string(bad) + "'"), std::string::npos)
        << faults.status().ToString();
  }
}

TEST(FaultOptionsTest, CheckNamesTheFieldOutOfRange) {
  EXPECT_TRUE(CheckFaultOptions({}, "StoreOptions.faults").ok());
  FaultOptions faults;
  faults.enospc_probability = -0.5;
  Status s = CheckFaultOptions(faults, "StoreOptions.faults");
  ASSERT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("StoreOptions.faults.enospc_probability"), std::string::npos)
      << s.ToString();
}

}  // namespace
}  // namespace strata::engine
