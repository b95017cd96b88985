// strata-test-labels: unit
#include "engine/fault_spec.h"

#include <gtest/gtest.h>

namespace strata::engine {
namespace {

TEST(FaultSpecTest, ParsesEveryKey) {
  auto spec = ParseFaultSpec("eio=0.01,enospc=0.001,delay_us=200,seed=9");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_DOUBLE_EQ(spec->eio_probability, 0.01);
  EXPECT_DOUBLE_EQ(spec->enospc_probability, 0.001);
  EXPECT_EQ(spec->delay_us, 200u);
  EXPECT_EQ(spec->seed, 9u);
  EXPECT_TRUE(spec->active());
}

TEST(FaultSpecTest, EmptyIsInactive) {
  auto spec = ParseFaultSpec("");
  ASSERT_TRUE(spec.ok());
  EXPECT_FALSE(spec->active());
}

TEST(FaultSpecTest, BadPairsAreNamed) {
  for (const char* bad : {"eio=2", "eio=x", "eio", "delay_us=-5", "speed=1", "enospc="}) {
    auto spec = ParseFaultSpec(bad);
    ASSERT_TRUE(spec.status().IsInvalidArgument()) << bad;
    EXPECT_NE(spec.status().message().find(std::string(bad).substr(0, 3)), std::string::npos)
        << spec.status().ToString();
  }
}

}  // namespace
}  // namespace strata::engine
