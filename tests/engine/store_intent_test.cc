// strata-test-labels: integration
// strata-test-timeout: 300
// Intent semantics of the Store: window edges, expiry unpinning, overload,
// prefetch two batches ahead, and exact accumulation under eviction churn.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <thread>

#include "strata/store.h"

namespace strata {
namespace {

std::string FreshDir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() /
           ("strata_intent_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(p);
  return p.string();
}

std::vector<TableOptions> Tables(int n, uint32_t dim, float lr, Initializer init) {
  std::vector<TableOptions> tables;
  for (int i = 0; i < n; ++i) {
    TableOptions t;
    t.name = "table" + std::to_string(i);
    t.dim = dim;
    t.optimizer.kind = Optimizer::kSgd;
    t.optimizer.learning_rate = lr;
    t.initializer = init;
    tables.push_back(t);
  }
  return tables;
}

std::unique_ptr<Store> OpenOrDie(const StoreOptions& o, const std::vector<TableOptions>& t) {
  auto r = Store::Open(o, t);
  if (!r.ok()) {
    ADD_FAILURE() << r.status().ToString();
    std::abort();
  }
  return std::move(r).value();
}

StoreOptions Options(const std::string& dir, uint64_t device_rows, uint64_t dram_rows) {
  StoreOptions o;
  o.dir = dir;
  o.device_rows_max = device_rows;
  o.dram_rows_max = dram_rows;
  o.use_gpu = false;
  o.planner_round_us = 50;
  return o;
}

std::vector<Key> Range(Key from, size_t n) {
  std::vector<Key> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = from + i;
  return keys;
}

// T0 holds 64 rows; intents may pin 56. A window of 48 keys pins them until
// its end; a second window of 48 waits (deferred) until the first expires.
TEST(StoreIntentTest, ExpiredWindowsUnpinAndWaitingWindowsProceed) {
  std::string dir = FreshDir("expire");
  auto store = OpenOrDie(Options(dir, 64, 1024), Tables(1, 4, 0.1f, Initializer::kZeros));
  WorkerId w = *store->RegisterWorker();
  ASSERT_TRUE(store->Intent(w, 0, Range(0, 48), 0, 2).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  EXPECT_EQ(store->Stats().prefetched_rows, 48u);
  ASSERT_TRUE(store->Intent(w, 0, Range(1000, 48), 1, 3).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  StoreStats s = store->Stats();
  EXPECT_EQ(s.prefetched_rows, 48u);
  EXPECT_GT(s.deferred_intents, 0u);
  // Clock 1: the first window is still active (its end is 2).
  ASSERT_TRUE(store->AdvanceClock(w).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  EXPECT_EQ(store->Stats().prefetched_rows, 48u);
  // Clock 2: it expires, its rows are unpinned, the second window acts.
  ASSERT_TRUE(store->AdvanceClock(w).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  s = store->Stats();
  EXPECT_EQ(s.prefetched_rows, 96u);
  EXPECT_GT(s.late_prefetches, 0u);  // its window had opened at clock 1
  std::filesystem::remove_all(dir);
}

TEST(StoreIntentTest, OverloadIsNeitherErrorNorDeadlock) {
  std::string dir = FreshDir("overload");
  auto store = OpenOrDie(Options(dir, 32, 256), Tables(1, 4, 0.1f, Initializer::kZeros));
  WorkerId w = *store->RegisterWorker();
  // Every batch wants 40 keys: more than T0 can pin.
  for (Clock b = 0; b < 6; ++b) {
    ASSERT_TRUE(store->Intent(w, 0, Range(b * 100, 40), b, b + 1).ok());
  }
  ASSERT_TRUE(store->DrainIntents().ok());
  std::vector<float> out(40 * 4), grads(40 * 4, 1.0f);
  for (Clock b = 0; b < 6; ++b) {
    ASSERT_TRUE(store->Pull(w, 0, Range(b * 100, 40), out.data()).ok());
    ASSERT_TRUE(store->Push(w, 0, Range(b * 100, 40), grads.data()).ok());
    ASSERT_TRUE(store->AdvanceClock(w).ok());
    ASSERT_TRUE(store->DrainIntents().ok());
  }
  StoreStats s = store->Stats();
  EXPECT_GT(s.deferred_intents, 0u);
  EXPECT_GT(s.stall_pulls, 0u);
  std::filesystem::remove_all(dir);
}

TEST(StoreIntentTest, IntentsTwoBatchesAheadRemoveStalls) {
  std::string dir = FreshDir("ahead");
  auto store = OpenOrDie(Options(dir, 512, 4096), Tables(2, 8, 0.1f, Initializer::kUniform));
  WorkerId w = *store->RegisterWorker();
  std::mt19937_64 rng(3);
  const int kBatches = 40;
  std::vector<std::vector<Key>> batches(kBatches);
  for (auto& b : batches) {
    b.resize(64);
    for (auto& k : b) k = rng() % 5000;
  }
  auto signal = [&](int b) {
    if (b >= kBatches) return;
    std::vector<TableKeys> tk{{0, batches[b]}, {1, batches[b]}};
    ASSERT_TRUE(store->Intent(w, tk, b, b + 1).ok());
  };
  signal(0);
  signal(1);
  std::vector<float> out(64 * 8), grads(64 * 8, 0.5f);
  for (int b = 0; b < kBatches; ++b) {
    signal(b + 2);
    ASSERT_TRUE(store->DrainIntents().ok());
    for (TableId t = 0; t < 2; ++t) {
      ASSERT_TRUE(store->Pull(w, t, batches[b], out.data()).ok());
      ASSERT_TRUE(store->Push(w, t, batches[b], grads.data()).ok());
    }
    ASSERT_TRUE(store->AdvanceClock(w).ok());
  }
  StoreStats s = store->Stats();
  EXPECT_EQ(s.stall_pulls, 0u) << s.ToString();
  EXPECT_GT(s.prefetched_rows, 0u);
  EXPECT_GT(s.t0.evictions, 0u);  // the tier was too small to hold everything
  std::filesystem::remove_all(dir);
}

TEST(StoreIntentTest, NoIntentPathIsAnLruCache) {
  std::string dir = FreshDir("lru");
  auto store = OpenOrDie(Options(dir, 16, 1024), Tables(1, 2, 0.1f, Initializer::kZeros));
  WorkerId w = *store->RegisterWorker();
  std::vector<float> out(16 * 2);
  // Touch 0..15, then re-touch 0..7, then bring 8 new keys: 8..15 (least
  // recently used) must be the ones evicted.
  ASSERT_TRUE(store->Pull(w, 0, Range(0, 16), out.data()).ok());
  ASSERT_TRUE(store->Pull(w, 0, Range(0, 8), out.data()).ok());
  ASSERT_TRUE(store->Pull(w, 0, Range(100, 8), out.data()).ok());
  StoreStats before = store->Stats();
  ASSERT_TRUE(store->Pull(w, 0, Range(0, 8), out.data()).ok());
  StoreStats after = store->Stats();
  EXPECT_EQ(after.stall_pulls, before.stall_pulls);
  ASSERT_TRUE(store->Pull(w, 0, Range(8, 8), out.data()).ok());
  EXPECT_EQ(store->Stats().stall_pulls, after.stall_pulls + 8);
  std::filesystem::remove_all(dir);
}

// With the frequency-aware fallback, a hot set touched often survives a
// stream of cold keys that LRU would let flush it.
TEST(StoreIntentTest, LfuFallbackKeepsHotRowsThroughAColdScan) {
  for (FallbackPolicy policy : {FallbackPolicy::kLru, FallbackPolicy::kLfu}) {
    std::string dir = FreshDir(policy == FallbackPolicy::kLfu ? "lfu" : "lru_scan");
    StoreOptions o = Options(dir, 32, 16);
    o.fallback_policy = policy;
    auto store = OpenOrDie(o, Tables(1, 2, 0.1f, Initializer::kZeros));
    WorkerId w = *store->RegisterWorker();
    std::vector<float> out(64 * 2);
    for (int r = 0; r < 20; ++r) ASSERT_TRUE(store->Pull(w, 0, Range(0, 16), out.data()).ok());
    for (int r = 0; r < 4; ++r) {  // 64 cold keys, 8 at a time, each once
      for (int c = 0; c < 8; ++c) {
        ASSERT_TRUE(store->Pull(w, 0, Range(1000 + r * 64 + c * 8, 8), out.data()).ok());
      }
    }
    StoreStats before = store->Stats();
    ASSERT_TRUE(store->Pull(w, 0, Range(0, 16), out.data()).ok());
    uint64_t stalls = store->Stats().stall_pulls - before.stall_pulls;
    if (policy == FallbackPolicy::kLfu) {
      EXPECT_EQ(stalls, 0u);
    } else {
      EXPECT_EQ(stalls, 16u);
    }
    store.reset();
    std::filesystem::remove_all(dir);
  }
}

// Eight workers push +1 (SGD, learning rate -1, gradient 1) on a skewed key
// set, with intents, while tiny tiers force constant eviction and prefetch.
// Every key ends at exactly its push count.
TEST(StoreIntentTest, EightWorkersAccumulateExactly) {
  std::string dir = FreshDir("accumulate");
  const uint32_t dim = 2;
  auto store = OpenOrDie(Options(dir, 2 * 96, 160), Tables(2, dim, -1.0f, Initializer::kZeros));
  const int kWorkers = 8, kSteps = 60;
  std::vector<WorkerId> ids;
  for (int i = 0; i < kWorkers; ++i) ids.push_back(*store->RegisterWorker());
  std::vector<std::vector<std::vector<Key>>> plan(kWorkers);
  std::vector<std::unordered_map<Key, int64_t>> expected(2);
  std::mt19937_64 rng(11);
  std::vector<std::vector<TableId>> plan_table(kWorkers);
  for (int i = 0; i < kWorkers; ++i) {
    for (int s = 0; s < kSteps; ++s) {
      std::vector<Key> keys(1 + rng() % 16);
      for (auto& k : keys) {
        double u = double(rng() % 1000000) / 1e6;
        k = static_cast<Key>(300 * u * u * u);  // skewed towards small keys
      }
      TableId t = rng() % 2;
      for (Key k : keys) expected[t][k]++;
      plan[i].push_back(keys);
      plan_table[i].push_back(t);
    }
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, i] {
      for (int s = 0; s < kSteps; ++s) {
        if (s + 2 < kSteps &&
            !store->Intent(ids[i], plan_table[i][s + 2], plan[i][s + 2], s + 2, s + 3).ok()) {
          failures++;
        }
        const auto& keys = plan[i][s];
        std::vector<float> out(keys.size() * dim), grads(keys.size() * dim, 1.0f);
        if (!store->Pull(ids[i], plan_table[i][s], keys, out.data()).ok()) failures++;
        if (!store->Push(ids[i], plan_table[i][s], keys, grads.data()).ok()) failures++;
        if (!store->AdvanceClock(ids[i]).ok()) failures++;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  StoreStats s = store->Stats();
  EXPECT_GT(s.t0.evictions, 0u) << s.ToString();
  EXPECT_GT(s.t1.evictions, 0u) << s.ToString();
  for (TableId t = 0; t < 2; ++t) {
    size_t seen = 0;
    ASSERT_TRUE(store->ScanTable(t, [&](Key k, std::span<const float> v) -> Status {
      ++seen;
      int64_t want = expected[t].count(k) ? expected[t][k] : 0;
      for (float x : v) {
        if (x != float(want)) {
          return Status::Internal("key " + std::to_string(k) + ": " + std::to_string(x) +
                                  " != " + std::to_string(want));
        }
      }
      return Status::Ok();
    }).ok());
    EXPECT_EQ(seen, expected[t].size());
  }
  std::filesystem::remove_all(dir);
}

// Two tables with equal shares of a 64-row T0 (32 each): table 0 cycles
// over 48 keys, table 1 over 4. With lending, table 0 borrows the room table
// 1 leaves unused and stops missing; with the static split it misses every
// batch. Returns table 0's T0 misses over the last 10 of 60 batches.
uint64_t LateMissesOfTheBigTable(double growth, const std::string& name) {
  std::string dir = FreshDir(name);
  StoreOptions o = Options(dir, 64, 1024);
  o.device_share_growth_max = growth;
  auto store = OpenOrDie(o, Tables(2, 4, 0.1f, Initializer::kZeros));
  WorkerId w = *store->RegisterWorker();
  std::vector<float> out(48 * 4);
  uint64_t misses_before = 0;
  for (int b = 0; b < 60; ++b) {
    if (b == 50) misses_before = store->Stats().t0.misses;
    EXPECT_TRUE(store->Pull(w, 0, Range(0, 48), out.data()).ok());
    EXPECT_TRUE(store->Pull(w, 1, Range(0, 4), out.data()).ok());
    EXPECT_TRUE(store->AdvanceClock(w).ok());
    EXPECT_TRUE(store->DrainIntents().ok());  // a planner round: one rebalancing step
  }
  const uint64_t late = store->Stats().t0.misses - misses_before;
  EXPECT_TRUE(store->Close().ok());
  std::filesystem::remove_all(dir);
  return late;
}

TEST(StoreIntentTest, T0QuotaMovesToTheTableThatNeedsIt) {
  EXPECT_GE(LateMissesOfTheBigTable(0.0, "quota_static"), 10u * 16u);
  EXPECT_EQ(LateMissesOfTheBigTable(1.0, "quota_lent"), 0u);
}

TEST(StoreIntentTest, BadShareGrowthIsRejected) {
  for (double bad : {-0.5, 17.0, std::nan("")}) {
    std::string dir = FreshDir("bad_growth");
    StoreOptions o = Options(dir, 64, 1024);
    o.device_share_growth_max = bad;
    auto r = Store::Open(o, Tables(2, 4, 0.1f, Initializer::kZeros));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsInvalidArgument());
    EXPECT_NE(r.status().message().find("device_share_growth_max"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(dir));
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace strata
