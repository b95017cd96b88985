// strata-test-labels: unit
#include "trace/cache_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "strata/trace.h"
#include "tests/trace/test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::trace {
namespace {

using strata::testing::ScratchDir;
using Batches = std::vector<std::vector<Key>>;  // one table, keys per batch

IndexedTrace Load(const ScratchDir& dir, const Batches& batches) {
  TraceHeader h;
  h.tables = {{"t", 0}};
  const std::string path = dir.File("t.trace");
  auto w = TraceWriter::Create(path, h);
  EXPECT_TRUE(w.ok());
  for (size_t b = 0; b < batches.size(); ++b) {
    TraceBatch batch;
    batch.clock = static_cast<Clock>(b);
    batch.tables = {{0, batches[b]}};
    EXPECT_TRUE((*w)->Append(batch).ok());
  }
  EXPECT_TRUE((*w)->Finish().ok());
  auto t = LoadIndexedTrace(path);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

uint64_t Misses(const IndexedTrace& t, uint64_t cache, uint64_t lookahead,
                FallbackOrder fallback = FallbackOrder::kLru) {
  auto m = SimulateMisses(t, cache, lookahead, fallback);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : 0;
}

// Distinct keys of each batch in order of first appearance.
std::vector<std::vector<Key>> Dedup(const Batches& batches) {
  std::vector<std::vector<Key>> out;
  for (const auto& b : batches) {
    std::vector<Key> d;
    for (Key k : b) {
      if (std::find(d.begin(), d.end(), k) == d.end()) d.push_back(k);
    }
    out.push_back(d);
  }
  return out;
}

// Model LRU: a map key -> last use; ties broken by first appearance.
uint64_t NaiveLru(const Batches& batches, uint64_t cache) {
  std::map<Key, int> first;
  for (const auto& b : batches) {
    for (Key k : b) first.emplace(k, static_cast<int>(first.size()));
  }
  std::map<Key, uint64_t> last_use;  // cached keys
  uint64_t misses = 0;
  const auto dedup = Dedup(batches);
  for (uint64_t b = 0; b < dedup.size(); ++b) {
    const std::set<Key> in(dedup[b].begin(), dedup[b].end());
    for (Key k : in) misses += last_use.count(k) == 0;
    while (last_use.size() +
               std::count_if(in.begin(), in.end(), [&](Key k) { return last_use.count(k) == 0; }) >
           cache) {
      Key victim = 0;
      bool found = false;
      for (auto& [k, u] : last_use) {
        if (in.count(k)) continue;
        if (!found || u < last_use[victim] || (u == last_use[victim] && first[k] < first[victim])) {
          victim = k;
          found = true;
        }
      }
      last_use.erase(victim);
    }
    for (Key k : in) last_use[k] = b;
  }
  return misses;
}

// The true optimum by exhaustive search over every eviction choice.
uint64_t BruteForceOptimum(const Batches& batches, uint64_t cache) {
  const auto dedup = Dedup(batches);
  std::function<uint64_t(size_t, std::set<Key>)> go = [&](size_t b, std::set<Key> cached) {
    if (b == dedup.size()) return uint64_t{0};
    std::vector<Key> missing;
    std::vector<Key> evictable;
    for (Key k : dedup[b]) {
      if (!cached.count(k)) missing.push_back(k);
    }
    for (Key k : cached) {
      if (std::find(dedup[b].begin(), dedup[b].end(), k) == dedup[b].end()) evictable.push_back(k);
    }
    const size_t need =
        cached.size() + missing.size() > cache ? cached.size() + missing.size() - cache : 0;
    uint64_t best = UINT64_MAX;
    // Every subset of `evictable` of size `need`.
    std::vector<bool> pick(evictable.size(), false);
    std::fill(pick.begin(), pick.begin() + static_cast<std::ptrdiff_t>(need), true);
    do {
      std::set<Key> next = cached;
      for (size_t i = 0; i < evictable.size(); ++i) {
        if (pick[i]) next.erase(evictable[i]);
      }
      for (Key k : missing) next.insert(k);
      best = std::min(best, missing.size() + go(b + 1, next));
    } while (std::prev_permutation(pick.begin(), pick.end()));
    return best;
  };
  return go(0, {});
}

TEST(CacheSimTest, BeladyOnAHandCheckedSequence) {
  ScratchDir dir;
  // a b c a b d a b c with two rows: MIN misses a b c - - b d - b c = 7
  // (evicting b at c, c at the second b, b at d); LRU misses all 9.
  const Batches seq = {{1}, {2}, {3}, {1}, {2}, {4}, {1}, {2}, {3}};
  const auto t = Load(dir, seq);
  EXPECT_EQ(Misses(t, 2, kLookaheadUnbounded), 7u);
  EXPECT_EQ(Misses(t, 2, 0), 9u);
  // Knowing one batch ahead is enough here to make every MIN choice.
  EXPECT_EQ(Misses(t, 2, 1), 7u);
  EXPECT_EQ(Misses(t, 3, kLookaheadUnbounded), 5u);  // 4 compulsory + c after d
  EXPECT_EQ(Misses(t, 4, 0), 4u);                    // everything fits
}

TEST(CacheSimTest, AllRowsOfABatchAreResidentTogether) {
  ScratchDir dir;
  const auto t = Load(dir, {{1, 2, 1}, {3}, {1, 2}});
  EXPECT_EQ(t.max_batch_rows, 2u);
  EXPECT_EQ(t.raw_keys, 6u);
  EXPECT_EQ(Misses(t, 2, kLookaheadUnbounded), 4u);  // 3 evicts one of 1, 2; it comes back
  EXPECT_EQ(Misses(t, 3, kLookaheadUnbounded), 3u);
  auto too_small = SimulateMisses(t, 1, 0, FallbackOrder::kLru);
  EXPECT_TRUE(too_small.status().IsInvalidArgument());
}

TEST(CacheSimTest, LruMatchesANaiveModel) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 30; ++trial) {
    ScratchDir dir;
    Batches batches(40);
    for (auto& b : batches) {
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) b.push_back(rng() % 12);
    }
    const auto t = Load(dir, batches);
    for (uint64_t cache : {4, 6, 9}) {
      EXPECT_EQ(Misses(t, cache, 0), NaiveLru(batches, cache)) << trial << " " << cache;
    }
  }
}

TEST(CacheSimTest, MinIsOptimalAndBoundsEveryHorizon) {
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 25; ++trial) {
    ScratchDir dir;
    Batches batches(9);
    for (auto& b : batches) {
      const int n = 1 + static_cast<int>(rng() % 2);
      for (int i = 0; i < n; ++i) b.push_back(rng() % 6);
    }
    const auto t = Load(dir, batches);
    for (uint64_t cache : {2, 3}) {
      const uint64_t opt = Misses(t, cache, kLookaheadUnbounded);
      EXPECT_EQ(opt, BruteForceOptimum(batches, cache)) << trial << " " << cache;
      const uint64_t lru = Misses(t, cache, 0);
      EXPECT_LE(opt, lru);
      for (uint64_t l : {1, 2, 4}) {
        for (auto f : {FallbackOrder::kLru, FallbackOrder::kLfu}) {
          const uint64_t h = Misses(t, cache, l, f);
          EXPECT_LE(opt, h);
          EXPECT_GE(h, t.index.size());  // compulsory misses
        }
      }
      EXPECT_EQ(Misses(t, cache, batches.size()), opt);  // the horizon covers everything
    }
  }
}

TEST(CacheSimTest, LfuFallbackKeepsTheHotRow) {
  ScratchDir dir;
  // Row 1 is used often; a scan of once-used rows passes by. LRU lets the
  // scan push 1 out; LFU keeps it.
  Batches seq = {{1}, {1}, {1}};
  for (Key k = 10; k < 20; ++k) {
    seq.push_back({k});
    seq.push_back({k + 100});
    seq.push_back({1});
  }
  const auto t = Load(dir, seq);
  const uint64_t lru = Misses(t, 2, 0, FallbackOrder::kLru);
  const uint64_t lfu = Misses(t, 2, 0, FallbackOrder::kLfu);
  EXPECT_EQ(lfu, 21u);  // 1 once, each scan row once
  EXPECT_GT(lru, lfu);
}

TEST(CacheSimTest, RunOptReportsAllThree) {
  ScratchDir dir;
  const auto t = Load(dir, {{1}, {2}, {3}, {1}, {2}, {4}, {1}, {2}, {3}});
  auto r = RunOpt(t, 2, 1, FallbackOrder::kLru);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->opt_misses, 7u);
  EXPECT_EQ(r->lru_misses, 9u);
  EXPECT_EQ(r->horizon_misses, 7u);
  EXPECT_EQ(r->unique_rows, 4u);
  EXPECT_EQ(r->batches, 9u);
}

}  // namespace
}  // namespace strata::trace
