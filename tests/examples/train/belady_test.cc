#include "examples/train/belady.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>

namespace strata::train {
namespace {

AccessRecorder Record(const std::vector<std::vector<Key>>& batches, TableId table = 0) {
  AccessRecorder r;
  for (const auto& keys : batches) {
    r.BeginBatch();
    r.Add(table, keys);
  }
  return r;
}

TEST(BeladyTest, HandCheckedCycle) {
  // A B C A B C with room for 2: MIN keeps A for batch 3 and C for batch 5.
  auto r = Record({{1}, {2}, {3}, {1}, {2}, {3}});
  CacheSimResult min = SimulateCache(r, 2, CachePolicy::kBeladyMin);
  EXPECT_EQ(min.accesses, 6u);
  EXPECT_EQ(min.first_touches, 3u);
  EXPECT_EQ(min.reads, 1u);
  CacheSimResult lru = SimulateCache(r, 2, CachePolicy::kLru);
  EXPECT_EQ(lru.first_touches, 3u);
  EXPECT_EQ(lru.reads, 3u);  // LRU always evicts the next one needed
}

TEST(BeladyTest, BatchKeysResidentTogetherAndTablesDistinct) {
  AccessRecorder r;
  r.BeginBatch();
  r.Add(0, std::vector<Key>{7, 8});
  r.Add(1, std::vector<Key>{7});  // same key, other table: another row
  r.BeginBatch();
  r.Add(0, std::vector<Key>{9});
  r.BeginBatch();
  r.Add(1, std::vector<Key>{7});
  EXPECT_EQ(r.unique_rows(), 4u);
  CacheSimResult min = SimulateCache(r, 3, CachePolicy::kBeladyMin);
  EXPECT_EQ(min.first_touches, 4u);
  EXPECT_EQ(min.reads, 0u);  // batch 1 evicts a row never used again, not (1, 7)
  CacheSimResult lru = SimulateCache(r, 3, CachePolicy::kLru);
  EXPECT_EQ(lru.reads, 0u);  // (0,7), (0,8), (1,7) tie on recency; id order evicts (0,7)
}

// The fewest reads any eviction choice achieves, by trying them all.
uint64_t ExhaustiveMinReads(const AccessRecorder& r, size_t capacity) {
  std::function<uint64_t(size_t, std::set<uint32_t>, std::set<uint32_t>)> go =
      [&](size_t b, std::set<uint32_t> cache, std::set<uint32_t> seen) -> uint64_t {
    if (b == r.batches()) return 0;
    uint64_t reads = 0;
    auto ids = r.Batch(b);
    for (uint32_t id : ids) {
      if (!cache.count(id) && seen.count(id)) ++reads;
      cache.insert(id);
      seen.insert(id);
    }
    std::vector<uint32_t> candidates;
    for (uint32_t id : cache) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) candidates.push_back(id);
    }
    size_t excess = cache.size() > capacity ? cache.size() - capacity : 0;
    if (excess == 0) return reads + go(b + 1, cache, seen);
    uint64_t best = UINT64_MAX;
    // Every way to evict `excess` of the candidates (excess is 1 with one-key batches).
    std::vector<bool> pick(candidates.size(), false);
    std::fill(pick.end() - static_cast<long>(excess), pick.end(), true);
    do {
      std::set<uint32_t> next = cache;
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (pick[i]) next.erase(candidates[i]);
      }
      best = std::min(best, go(b + 1, next, seen));
    } while (std::next_permutation(pick.begin(), pick.end()));
    return reads + best;
  };
  return go(0, {}, {});
}

TEST(BeladyTest, MinEqualsExhaustiveOptimumAndBeatsLru) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 30; ++trial) {
    std::vector<std::vector<Key>> batches;
    for (int b = 0; b < 10; ++b) batches.push_back({static_cast<Key>(rng() % 5)});
    auto r = Record(batches);
    for (size_t capacity : {1u, 2u, 3u}) {
      uint64_t min = SimulateCache(r, capacity, CachePolicy::kBeladyMin).reads;
      EXPECT_EQ(min, ExhaustiveMinReads(r, capacity)) << "trial " << trial << " cap " << capacity;
      EXPECT_LE(min, SimulateCache(r, capacity, CachePolicy::kLru).reads);
    }
  }
}

TEST(BeladyTest, EverythingFitsMeansNoReads) {
  std::mt19937 rng(3);
  std::vector<std::vector<Key>> batches;
  for (int b = 0; b < 50; ++b) batches.push_back({rng() % 100, 100 + rng() % 100});
  auto r = Record(batches);
  CacheSimResult all = SimulateCache(r, r.unique_rows(), CachePolicy::kLru);
  EXPECT_EQ(all.reads, 0u);
  EXPECT_EQ(all.first_touches, r.unique_rows());
}

}  // namespace
}  // namespace strata::train
