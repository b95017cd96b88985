// strata-test-labels: unit
#include "io/bounded_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace strata::io {
namespace {

TEST(BoundedQueueTest, FifoAndBounds) {
  BoundedQueue<int> q(4);
  EXPECT_TRUE(q.Empty());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(q.TryPush(i));
  EXPECT_FALSE(q.TryPush(99));  // full
  int v = -1;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(q.TryPop(&v));
    EXPECT_EQ(v, i);
  }
  EXPECT_FALSE(q.TryPop(&v));
  EXPECT_TRUE(q.Empty());
}

// Many producers, one consumer (the I/O thread's pattern): every value
// arrives exactly once.
TEST(BoundedQueueTest, ManyProducersNothingLostOrDuplicated) {
  BoundedQueue<uint64_t> q(8);
  constexpr int kProducers = 4;
  constexpr uint64_t kEach = 20000;
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kEach; ++i) {
        while (!q.TryPush(uint64_t(p) * kEach + i)) std::this_thread::yield();
      }
    });
  }
  std::vector<uint8_t> seen(kProducers * kEach, 0);
  uint64_t got = 0;
  while (got < seen.size()) {
    uint64_t v;
    if (q.TryPop(&v)) {
      ASSERT_LT(v, seen.size());
      ++seen[v];
      ++got;
    } else {
      std::this_thread::yield();
    }
  }
  for (auto& t : producers) t.join();
  for (uint8_t count : seen) ASSERT_EQ(count, 1);
}

}  // namespace
}  // namespace strata::io
