// The host runner's pool: every index exactly once, concurrent callers, and
// the shared pool's threads all at work.
#include "kernels/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
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

// One process-wide pool with a thread per hardware thread, all of which
// ParallelFor puts to work: each of threads() chunks waits until every
// chunk has started, which only returns when that many threads run at once.
TEST(ThreadPoolTest, SharedPoolRunsOnEveryHardwareThread) {
  ThreadPool& pool = ThreadPool::Shared();
  EXPECT_EQ(&pool, &ThreadPool::Shared());
  const uint32_t threads = std::max(1u, std::thread::hardware_concurrency());
  ASSERT_EQ(pool.threads(), threads);
  std::mutex mu;
  std::condition_variable all_started;
  uint32_t started = 0;
  std::set<std::thread::id> ids;
  bool timed_out = false;
  // A deadline only so that a pool short of threads fails instead of hanging.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  pool.ParallelFor(threads, 1, 0, [&](uint64_t, uint64_t) {
    std::unique_lock lock(mu);
    ids.insert(std::this_thread::get_id());
    if (++started == threads) all_started.notify_all();
    if (!all_started.wait_until(lock, deadline, [&] { return started == threads; })) {
      timed_out = true;
    }
  });
  EXPECT_FALSE(timed_out) << started << " of " << threads << " chunks ran at once";
  EXPECT_EQ(ids.size(), threads);
}

}  // namespace
}  // namespace strata::kernels
