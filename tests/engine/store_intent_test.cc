// strata-test-labels: integration gpu
// strata-test-timeout: 300
// Intent semantics of the Store on each T0 runner and SSD backend: window
// edges, expiry unpinning, overload, prefetch two batches ahead, and exact
// accumulation under eviction churn.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include "strata/store.h"
#include "tests/engine/store_test_util.h"

namespace strata {
namespace {

using testing::KeyRange;
using testing::ScanRows;
using testing::SgdTables;

class StoreIntentTest : public testing::StoreFixture {
 protected:
  uint64_t LateMissesOfTheBigTable(double growth, const std::string& name);
  // Two tables of dim 4 sharing a T0 of 64 rows (shares of 32, each may grow
  // to 64) above a T1 of 1024.
  std::unique_ptr<Store> OpenTwoTablesSharingT0() {
    StoreOptions o = Options(64, 1024);
    o.device_share_growth_max = 1.0;
    return Open(o, SgdTables(2, 4, 0.1f, Initializer::kZeros));
  }
};

// T0 holds 64 rows; intents may pin 56. A window of 48 keys pins them until
// its end; a second window of 48 waits (deferred, counted once) until the
// first expires. Both are fetched after their window opened: late.
TEST_P(StoreIntentTest, ExpiredWindowsUnpinAndWaitingWindowsProceed) {
  auto store = Open(Options(64, 1024), SgdTables(1, 4, 0.1f, Initializer::kZeros));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  ASSERT_TRUE(store->Intent(w, 0, KeyRange(0, 48), 0, 2).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  EXPECT_EQ(store->Stats().prefetched_rows, 48u);
  EXPECT_EQ(store->Stats().late_prefetches, 48u);  // clock 0 is in [0, 2)
  ASSERT_TRUE(store->Intent(w, 0, KeyRange(1000, 48), 1, 3).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  StoreStats s = store->Stats();
  EXPECT_EQ(s.prefetched_rows, 48u);
  EXPECT_EQ(s.deferred_intents, 48u);
  // Clock 1: the first window is still active (its end is 2).
  ASSERT_TRUE(store->AdvanceClock(w).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  s = store->Stats();
  EXPECT_EQ(s.prefetched_rows, 48u);
  EXPECT_EQ(s.deferred_intents, 48u);
  EXPECT_EQ(s.late_prefetches, 48u);
  // Clock 2: it expires, its rows are unpinned, the second window acts.
  ASSERT_TRUE(store->AdvanceClock(w).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  s = store->Stats();
  EXPECT_EQ(s.prefetched_rows, 96u);
  EXPECT_EQ(s.late_prefetches, 96u);  // clock 2 is in [1, 3)
  EXPECT_EQ(s.deferred_intents, 48u);
  // The second window's rows are resident: pulling them stalls on none.
  std::vector<float> out(48 * 4);
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(1000, 48), out.data()).ok());
  EXPECT_EQ(store->Stats().stall_pulls, 0u);
}

// StoreOptions::intent_act_ahead_max: a window starting 5 clocks ahead is
// within AdaPM's first horizon (lambda0 = 10), so the planner prefetches it
// with no bound (0) and, with a bound of 2 (the default), only once it
// starts before clock + 2: at clock 4.
TEST_P(StoreIntentTest, PlannerActsAtMostActAheadMaxClocksAhead) {
  for (uint32_t ahead : {0u, 2u}) {
    SCOPED_TRACE(ahead);
    StoreOptions o = Options(64, 1024, "ahead" + std::to_string(ahead));
    o.intent_act_ahead_max = ahead;
    auto store = Open(o, SgdTables(1, 4, 0.1f, Initializer::kZeros));
    ASSERT_NE(store, nullptr);
    WorkerId w = *store->RegisterWorker();
    ASSERT_TRUE(store->Intent(w, 0, KeyRange(0, 16), 5, 6).ok());
    ASSERT_TRUE(store->DrainIntents().ok());
    EXPECT_EQ(store->Stats().prefetched_rows, ahead == 0 ? 16u : 0u);
    for (int c = 1; c <= 4; ++c) {
      ASSERT_TRUE(store->AdvanceClock(w).ok());
      ASSERT_TRUE(store->DrainIntents().ok());
      EXPECT_EQ(store->Stats().prefetched_rows, ahead == 0 || c == 4 ? 16u : 0u) << c;
    }
    EXPECT_EQ(store->Stats().late_prefetches, 0u);
    ASSERT_TRUE(store->Close().ok());
  }
}

// T0 holds 32 rows, so intents may pin 28; every window wants 40. Each window
// waits (counted once, when it is the first due) until it expires, nothing is
// prefetched, every pulled key is fetched by its Pull, and no update is lost.
TEST_P(StoreIntentTest, OverloadIsNeitherErrorNorDeadlock) {
  auto store = Open(Options(32, 256), SgdTables(1, 4, 0.1f, Initializer::kZeros));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  // Every batch wants 40 keys: more than T0 can pin.
  for (Clock b = 0; b < 6; ++b) {
    ASSERT_TRUE(store->Intent(w, 0, KeyRange(b * 100, 40), b, b + 1).ok());
  }
  ASSERT_TRUE(store->DrainIntents().ok());
  std::vector<float> out(40 * 4), grads(40 * 4, 1.0f);
  for (Clock b = 0; b < 6; ++b) {
    ASSERT_TRUE(Pull(*store, w, 0, KeyRange(b * 100, 40), out.data()).ok());
    ASSERT_TRUE(Push(*store, w, 0, KeyRange(b * 100, 40), grads.data()).ok());
    ASSERT_TRUE(store->AdvanceClock(w).ok());
    ASSERT_TRUE(store->DrainIntents().ok());
  }
  StoreStats s = store->Stats();
  EXPECT_EQ(s.intents, 6u * 40u);
  EXPECT_EQ(s.deferred_intents, 6u * 40u);
  EXPECT_EQ(s.prefetched_rows, 0u);
  EXPECT_EQ(s.stall_pulls, 6u * 40u);
  EXPECT_EQ(s.pulls, 6u * 40u);
  EXPECT_EQ(s.planner_io_errors, 0u);
  // Zeros, one push of gradient 1 at learning rate 0.1: every row is -0.1.
  std::map<Key, std::vector<float>> want;
  for (Clock b = 0; b < 6; ++b) {
    for (Key k : KeyRange(b * 100, 40)) want[k] = std::vector<float>(4, -0.1f);
  }
  EXPECT_EQ(ScanRows(*store, 0), want);
}

TEST_P(StoreIntentTest, IntentsTwoBatchesAheadRemoveStalls) {
  auto store = Open(Options(512, 4096), SgdTables(2, 8, 0.1f, Initializer::kUniform));
  ASSERT_NE(store, nullptr);
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
      ASSERT_TRUE(Pull(*store, w, t, batches[b], out.data()).ok());
      ASSERT_TRUE(Push(*store, w, t, batches[b], grads.data()).ok());
    }
    ASSERT_TRUE(store->AdvanceClock(w).ok());
  }
  StoreStats s = store->Stats();
  EXPECT_EQ(s.stall_pulls, 0u) << s.ToString();
  EXPECT_EQ(s.pulls, 2u * kBatches * 64u);
  // No Pull fetched a row, so the planner brought every distinct key of both
  // tables in at least once (more where T0 evicted a row before its reuse).
  std::set<Key> distinct;
  for (const auto& b : batches) distinct.insert(b.begin(), b.end());
  EXPECT_GE(s.prefetched_rows, 2 * distinct.size()) << s.ToString();
  EXPECT_GT(s.t0.evictions, 0u);  // the tier was too small to hold everything
}

TEST_P(StoreIntentTest, NoIntentPathIsAnLruCache) {
  auto store = Open(Options(16, 1024), SgdTables(1, 2, 0.1f, Initializer::kZeros));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  std::vector<float> out(16 * 2);
  // Touch 0..15, then re-touch 0..7, then bring 8 new keys: 8..15 (least
  // recently used) must be the ones evicted.
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(0, 16), out.data()).ok());
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(0, 8), out.data()).ok());
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(100, 8), out.data()).ok());
  StoreStats before = store->Stats();
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(0, 8), out.data()).ok());
  StoreStats after = store->Stats();
  EXPECT_EQ(after.stall_pulls, before.stall_pulls);
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(8, 8), out.data()).ok());
  EXPECT_EQ(store->Stats().stall_pulls, after.stall_pulls + 8);
}

// With the frequency-aware fallback, a hot set touched often survives a
// stream of cold keys that LRU would let flush it.
TEST_P(StoreIntentTest, LfuFallbackKeepsHotRowsThroughAColdScan) {
  for (FallbackPolicy policy : {FallbackPolicy::kLru, FallbackPolicy::kLfu}) {
    StoreOptions o = Options(32, 16, policy == FallbackPolicy::kLfu ? "lfu" : "lru");
    o.fallback_policy = policy;
    auto store = Open(o, SgdTables(1, 2, 0.1f, Initializer::kZeros));
    ASSERT_NE(store, nullptr);
    WorkerId w = *store->RegisterWorker();
    std::vector<float> out(64 * 2);
    for (int r = 0; r < 20; ++r) ASSERT_TRUE(Pull(*store, w, 0, KeyRange(0, 16), out.data()).ok());
    for (int r = 0; r < 4; ++r) {  // 64 cold keys, 8 at a time, each once
      for (int c = 0; c < 8; ++c) {
        ASSERT_TRUE(Pull(*store, w, 0, KeyRange(1000 + r * 64 + c * 8, 8), out.data()).ok());
      }
    }
    StoreStats before = store->Stats();
    ASSERT_TRUE(Pull(*store, w, 0, KeyRange(0, 16), out.data()).ok());
    uint64_t stalls = store->Stats().stall_pulls - before.stall_pulls;
    if (policy == FallbackPolicy::kLfu) {
      EXPECT_EQ(stalls, 0u);
    } else {
      EXPECT_EQ(stalls, 16u);
    }
    store.reset();
  }
}

// Eight workers push +1 (SGD, learning rate -1, gradient 1) on a skewed key
// set, with intents, while tiny tiers force constant eviction and prefetch.
// Every key ends at exactly its push count.
TEST_P(StoreIntentTest, EightWorkersAccumulateExactly) {
  const uint32_t dim = 2;
  auto store = Open(Options(2 * 96, 160), SgdTables(2, dim, -1.0f, Initializer::kZeros));
  ASSERT_NE(store, nullptr);
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
        if (!Pull(*store, ids[i], plan_table[i][s], keys, out.data()).ok()) failures++;
        if (!Push(*store, ids[i], plan_table[i][s], keys, grads.data()).ok()) failures++;
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
    std::map<Key, std::vector<float>> want;
    for (const auto& [k, pushes] : expected[t]) want[k] = std::vector<float>(dim, float(pushes));
    EXPECT_EQ(ScanRows(*store, t), want) << "table " << t;
  }
}

// Two tables with equal shares of a 64-row T0 (32 each): table 0 cycles
// over 48 keys, table 1 over 4. With room to grow, table 0 takes the room
// table 1 leaves unused (T0's one order across tables) and stops missing;
// with no growth its slots hold 32 and it misses every batch. Returns table
// 0's T0 misses over the last 10 of 60 batches.
uint64_t StoreIntentTest::LateMissesOfTheBigTable(double growth, const std::string& name) {
  StoreOptions o = Options(64, 1024, name);
  o.device_share_growth_max = growth;
  auto store = Open(o, SgdTables(2, 4, 0.1f, Initializer::kZeros));
  if (store == nullptr) return 0;  // Open recorded the failure
  WorkerId w = *store->RegisterWorker();
  std::vector<float> out(48 * 4);
  uint64_t misses_before = 0;
  for (int b = 0; b < 60; ++b) {
    if (b == 50) misses_before = store->Stats().t0.misses;
    EXPECT_TRUE(Pull(*store, w, 0, KeyRange(0, 48), out.data()).ok());
    EXPECT_TRUE(Pull(*store, w, 1, KeyRange(0, 4), out.data()).ok());
    EXPECT_TRUE(store->AdvanceClock(w).ok());
  }
  const uint64_t late = store->Stats().t0.misses - misses_before;
  EXPECT_TRUE(store->Close().ok());
  return late;
}

TEST_P(StoreIntentTest, T0RoomGoesToTheTableThatNeedsIt) {
  // With no growth 32 of table 0's 48 keys fit: at least 16 miss every batch.
  EXPECT_GE(LateMissesOfTheBigTable(0.0, "room_static"), 10u * 16u);
  EXPECT_EQ(LateMissesOfTheBigTable(1.0, "room_shared"), 0u);
}

// T0 evicts by one LRU order across tables (no intents): with 64 rows of T0
// (shares 32 + 32, each table may grow to 64), the rows a table brings in
// displace the least recent rows of any table, never a more recent row of
// its own.
TEST_P(StoreIntentTest, T0EvictsTheLeastRecentRowsOfAnyTable) {
  auto store = OpenTwoTablesSharingT0();
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  std::vector<float> out(64 * 4);
  auto misses = [&](TableId t, Key from, size_t n) {
    const uint64_t before = store->Stats().t0.misses;
    EXPECT_TRUE(Pull(*store, w, t, KeyRange(from, n), out.data()).ok());
    return store->Stats().t0.misses - before;
  };
  EXPECT_EQ(misses(0, 0, 40), 40u);  // table 0 holds 40 rows, above its share
  EXPECT_EQ(misses(1, 0, 24), 24u);  // T0 full: 64 rows
  EXPECT_EQ(store->Stats().t0.rows, 64u);
  EXPECT_EQ(misses(0, 0, 40), 0u);  // all of table 0 stayed
  // 8 new rows of table 1 displace the 8 least recent rows: table 1's own
  // 0..23 (touched before table 0's second pull).
  EXPECT_EQ(misses(1, 100, 8), 8u);
  EXPECT_EQ(misses(0, 0, 40), 0u);
  EXPECT_EQ(misses(1, 100, 8), 0u);
  EXPECT_EQ(misses(1, 0, 24), 8u);
  EXPECT_EQ(store->Stats().t0.rows, 64u);
  ASSERT_TRUE(store->Close().ok());
}

// With intents, T0's victims are the rows whose next intended use is
// farthest, whichever table holds them.
TEST_P(StoreIntentTest, T0EvictsTheFarthestNextUseOfAnyTable) {
  auto store = OpenTwoTablesSharingT0();
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  std::vector<float> out(64 * 4);
  // Table 0's 32 rows are next used at clock 200, table 1's 32 at clock 300
  // (both beyond the planner's horizon: nothing is pinned).
  ASSERT_TRUE(store->Intent(w, 0, KeyRange(0, 32), 200, 201).ok());
  ASSERT_TRUE(store->Intent(w, 1, KeyRange(0, 32), 300, 301).ok());
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(0, 32), out.data()).ok());
  ASSERT_TRUE(Pull(*store, w, 1, KeyRange(0, 32), out.data()).ok());
  ASSERT_TRUE(store->DrainIntents().ok());
  EXPECT_EQ(store->Stats().t0.rows, 64u);
  // 16 new rows of table 0 displace 16 rows of table 1 (clock 300), not of
  // table 0 (clock 200).
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(100, 16), out.data()).ok());
  const uint64_t before = store->Stats().t0.misses;
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(0, 32), out.data()).ok());
  EXPECT_EQ(store->Stats().t0.misses, before);
  ASSERT_TRUE(Pull(*store, w, 1, KeyRange(0, 32), out.data()).ok());
  EXPECT_EQ(store->Stats().t0.misses, before + 16);
  ASSERT_TRUE(store->Close().ok());
}

// An intent counts from the call on: a Pull's evictions see it although the
// planner (its rounds 100 s apart here) has not taken it from the inbox.
TEST_P(StoreIntentTest, APullsEvictionsSeeAnIntentThePlannerHasNotTaken) {
  StoreOptions o = Options(64, 1024);
  o.device_share_growth_max = 1.0;
  o.planner_round_us = 100'000'000;
  auto store = Open(o, SgdTables(2, 4, 0.1f, Initializer::kZeros));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  std::vector<float> out(64 * 4);
  // T0 full: table 0's 32 rows are the least recent.
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(0, 32), out.data()).ok());
  ASSERT_TRUE(Pull(*store, w, 1, KeyRange(0, 32), out.data()).ok());
  EXPECT_EQ(store->Stats().t0.rows, 64u);
  // Table 0's rows are next used at clock 200 (beyond the planner's
  // horizon: nothing is pinned); table 1's have no intent.
  ASSERT_TRUE(store->Intent(w, 0, KeyRange(0, 32), 200, 201).ok());
  EXPECT_EQ(store->Stats().planner_rounds, 0u);
  // 16 new rows displace 16 of table 1 (no intended use), not the least
  // recent rows, table 0's, which have one.
  ASSERT_TRUE(Pull(*store, w, 1, KeyRange(100, 16), out.data()).ok());
  const uint64_t before = store->Stats().t0.misses;
  ASSERT_TRUE(Pull(*store, w, 0, KeyRange(0, 32), out.data()).ok());
  EXPECT_EQ(store->Stats().t0.misses, before);
  EXPECT_EQ(store->Stats().planner_rounds, 0u);
  ASSERT_TRUE(store->Close().ok());
}

TEST_P(StoreIntentTest, BadShareGrowthIsRejected) {
  for (double bad : {-0.5, 17.0, std::nan("")}) {
    StoreOptions o = Options(64, 1024);
    o.device_share_growth_max = bad;
    auto r = Store::Open(o, SgdTables(2, 4, 0.1f, Initializer::kZeros));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(r.status().IsInvalidArgument());
    EXPECT_NE(r.status().message().find("device_share_growth_max"), std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(o.dir));
  }
}

TEST_P(StoreIntentTest, BadDramShardCountsAreRejected) {
  for (uint32_t bad : {3u, 12u, 128u}) {
    StoreOptions o = Options(64, 1024);
    o.dram_shards = bad;
    auto r = Store::Open(o, SgdTables(2, 4, 0.1f, Initializer::kZeros));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().IsInvalidArgument());
    EXPECT_NE(r.status().message().find("dram_shards = " + std::to_string(bad)), std::string::npos)
        << r.status().ToString();
    EXPECT_FALSE(std::filesystem::exists(o.dir));
  }
}

// T1 in shards behind a whole store: every row pushed comes back after the
// tiers cycle it through T1 and T2, as with one shard.
TEST_P(StoreIntentTest, ShardedT1KeepsEveryRow) {
  StoreOptions o = Options(64, 256);
  o.dram_shards = 4;
  auto store = Open(o, SgdTables(2, 4, 0.1f, Initializer::kZeros));
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker();
  const std::vector<Key> keys = KeyRange(0, 400);
  std::vector<float> out(keys.size() * 4);
  const std::vector<float> grads(keys.size() * 4, 1.0f);
  // Three passes over 400 keys per table: T0 holds 64 rows, T1 256, so rows
  // leave through T1 (and its shards' evictions) to T2 and come back.
  for (int pass = 0; pass < 3; ++pass) {
    for (TableId t : {TableId{0}, TableId{1}}) {
      ASSERT_TRUE(Pull(*store, w, t, keys, out.data()).ok());
      for (size_t i = 0; i < keys.size(); ++i) {
        ASSERT_FLOAT_EQ(out[i * 4], -0.1f * static_cast<float>(pass))
            << "table " << t << " key " << keys[i] << " pass " << pass;
      }
      ASSERT_TRUE(Push(*store, w, t, keys, grads.data()).ok());
    }
  }
  EXPECT_GT(store->Stats().t1.evictions, 0u);
  ASSERT_TRUE(store->Close().ok());
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, StoreIntentTest, testing::StoreCombinations(),
                         testing::StoreCombinationName);

}  // namespace
}  // namespace strata
