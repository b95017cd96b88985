// strata-test-labels: unit gpu
// Runner memory helpers: the host staging arrays the engine sends batches
// through (page-locked on a GPU).
#include "kernels/runner.h"

#include <gtest/gtest.h>

#include "kernels/gpu_runtime.h"

namespace strata::kernels {
namespace {

void ReserveGrowsGeometricallyAndKeepsItsBuffer(Runner runner) {
  HostStaging<uint64_t> s;
  EXPECT_EQ(s.data(), nullptr);
  ASSERT_TRUE(s.Reserve(runner, 10).ok());
  ASSERT_NE(s.data(), nullptr);
  EXPECT_EQ(s.size(), 10u);
  for (uint64_t i = 0; i < 10; ++i) s.data()[i] = i;  // writable host memory
  uint64_t* first = s.data();
  ASSERT_TRUE(s.Reserve(runner, 7).ok());  // fits: the same buffer
  EXPECT_EQ(s.data(), first);
  EXPECT_EQ(s.data()[9], 9u);
  ASSERT_TRUE(s.Reserve(runner, 11).ok());  // doubles rather than creeping up
  EXPECT_EQ(s.size(), 20u);
  ASSERT_TRUE(s.Reserve(runner, 100).ok());
  EXPECT_EQ(s.size(), 100u);
  s.Reset();
  EXPECT_EQ(s.data(), nullptr);
  EXPECT_EQ(s.size(), 0u);
}

TEST(HostStagingTest, HostReserveGrowsGeometricallyAndKeepsItsBuffer) {
  ReserveGrowsGeometricallyAndKeepsItsBuffer(Runner::kHost);
}

TEST(HostStagingTest, GpuReserveGrowsGeometricallyAndKeepsItsBuffer) {
  if (VisibleGpuCount() == 0) GTEST_SKIP() << "no CUDA device visible" << CudaBuildInfo();
  ReserveGrowsGeometricallyAndKeepsItsBuffer(Runner::kGpu);
}

}  // namespace
}  // namespace strata::kernels
