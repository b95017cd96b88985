// strata-test-labels: unit
#include "io/buffer_pool.h"

#include <gtest/gtest.h>

#include <set>

#include "io/aligned.h"
#include "io/limits.h"

namespace strata::io {
namespace {

TEST(BufferPoolTest, HandsOutDistinctAlignedBuffersUntilEmpty) {
  auto pool = BufferPool::Create({.buffer_bytes = 5000, .buffer_count = 8, .numa_node = 0});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ((*pool)->buffer_bytes(), 8192u);
  std::set<uint8_t*> seen;
  for (int i = 0; i < 8; ++i) {
    uint8_t* b = (*pool)->Acquire();
    ASSERT_NE(b, nullptr);
    EXPECT_TRUE(IsAligned(reinterpret_cast<uintptr_t>(b)));
    EXPECT_TRUE((*pool)->Contains(b));
    std::memset(b, i, 8192);  // writable, no overlap with others (ASan)
    EXPECT_TRUE(seen.insert(b).second);
  }
  EXPECT_EQ((*pool)->Acquire(), nullptr);
  EXPECT_EQ((*pool)->free_count(), 0u);
  (*pool)->Release(*seen.begin());
  EXPECT_EQ((*pool)->Acquire(), *seen.begin());
  EXPECT_FALSE((*pool)->Contains(&seen));
  iovec region = (*pool)->region();
  EXPECT_GE(region.iov_len, 8u * 8192u);
}

TEST(BufferPoolTest, RejectsBadSizes) {
  EXPECT_TRUE(BufferPool::Create({.buffer_bytes = 0}).status().IsInvalidArgument());
  EXPECT_TRUE(BufferPool::Create({.buffer_count = 0}).status().IsInvalidArgument());
  EXPECT_TRUE(BufferPool::Create({.buffer_bytes = kBufferPoolBytesMax, .buffer_count = 2})
                  .status()
                  .IsInvalidArgument());
}

TEST(BufferPoolTest, DoubleReleaseIsAProgrammerError) {
  auto pool = BufferPool::Create({.buffer_bytes = 4096, .buffer_count = 2, .huge_pages = false});
  ASSERT_TRUE(pool.ok());
  uint8_t* b = (*pool)->Acquire();
  (*pool)->Release(b);
  EXPECT_DEATH((*pool)->Release(b), "twice");
}

}  // namespace
}  // namespace strata::io
