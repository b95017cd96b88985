// The host runner's pool: every index exactly once, concurrent callers.
#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace strata::kernels {
namespace {

TEST(ThreadPoolTest, EveryIndexExactlyOnce) {
  ThreadPool pool(4);
  for (uint64_t n : {0ull, 1ull, 7ull, 1000ull, 100003ull}) {
    std::vector<std::atomic<int>> hits(n);
    pool.ParallelFor(n, 64, 0, [&](uint64_t b, uint64_t e) {
      ASSERT_LT(b, e);
      for (uint64_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
    for (uint64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << i;
  }
}

TEST(ThreadPoolTest, ConcurrentCallersShareThePool) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::vector<uint64_t> sums(4, 0);
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        std::atomic<uint64_t> sum{0};
        pool.ParallelFor(10000, 100, c % 2 ? 2 : 0, [&](uint64_t b, uint64_t e) {
          uint64_t local = 0;
          for (uint64_t i = b; i < e; ++i) local += i;
          sum.fetch_add(local);
        });
        sums[c] += sum.load();
      }
    });
  }
  for (auto& t : callers) t.join();
  for (uint64_t s : sums) EXPECT_EQ(s, 20ull * (10000ull * 9999 / 2));
}

TEST(ThreadPoolTest, SharedPoolExists) { EXPECT_GE(ThreadPool::Shared().threads(), 1u); }

}  // namespace
}  // namespace strata::kernels
