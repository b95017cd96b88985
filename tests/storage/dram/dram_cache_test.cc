// strata-test-labels: unit
#include "storage/dram/dram_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>

#include "storage/dram/limits.h"
#include "tests/storage/dram/dram_test_util.h"

namespace strata::storage {
namespace {

using testing::MakeRow;
using testing::MakeRows;
using DramCacheTest = testing::DramCacheFixture;

TEST_F(DramCacheTest, EveryKeyIsValidAndRowsRoundTrip) {
  auto c = MakeCache(16, DramEviction::kIntent);
  std::vector<Key> keys = {0, 1, kKeyMax, 1ull << 63, kKeyMax - 1};
  ASSERT_TRUE(Put(*c, keys, 9, {}, {1, 0, 1, 0, 0}).ok());
  std::vector<Key> probe = {kKeyMax, 2, 0, 1ull << 63};
  std::vector<std::byte> rows(probe.size() * kRowBytes);
  std::vector<uint8_t> found(probe.size()), dirty(probe.size());
  ASSERT_TRUE(c->Lookup(kTable, probe, rows, found, dirty).ok());
  EXPECT_EQ(found, (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_EQ(dirty, (std::vector<uint8_t>{1, 0, 1, 0}));
  for (size_t i : {0, 2, 3}) {
    EXPECT_EQ(testing::RowVersion(probe[i], {rows.data() + i * kRowBytes, kRowBytes}), 9);
  }
  DramCacheStats s = c->Stats();
  EXPECT_EQ(s.rows, 5u);
  EXPECT_EQ(s.bytes_used, 5u * kRowBytes);
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.inserts, 5u);
  EXPECT_EQ(s.rows_max, 16u);
}

TEST_F(DramCacheTest, DuplicateKeysInOneInsertLastWins) {
  auto c = MakeCache(16, DramEviction::kIntent);
  std::vector<Key> keys = {5, 5, 6};
  std::vector<std::byte> rows;
  for (uint64_t v : {1, 2, 3}) {
    auto r = MakeRow(keys[v - 1], v, kRowBytes);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  std::vector<uint8_t> dirty = {1, 0, 1};
  ASSERT_TRUE(c->Insert(kTable, keys, rows, dirty, {}).ok());
  std::vector<Key> probe = {5};
  std::vector<std::byte> out(kRowBytes);
  std::vector<uint8_t> found(1), d(1);
  ASSERT_TRUE(c->Lookup(kTable, probe, out, found, d).ok());
  EXPECT_EQ(testing::RowVersion(5, out), 2);
  EXPECT_EQ(d[0], 0);
  EXPECT_EQ(c->Stats().rows, 2u);
}

TEST_F(DramCacheTest, BadInputGetsClearErrorAndChangesNothing) {
  auto c = MakeCache(4, DramEviction::kIntent);
  ASSERT_TRUE(Put(*c, {1, 2}).ok());
  std::vector<Key> keys = {3};
  std::vector<std::byte> short_rows(kRowBytes - 1);
  Status s = c->Insert(kTable, keys, short_rows, {}, {});
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("'emb'"), std::string::npos) << s.ToString();
  auto rows = MakeRows(keys, 1, kRowBytes);
  std::vector<uint8_t> bad_dirty = {1, 1};
  EXPECT_TRUE(c->Insert(kTable, keys, rows, bad_dirty, {}).IsInvalidArgument());
  s = c->Insert(99, keys, rows, {}, {});
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("99"), std::string::npos) << s.ToString();
  std::vector<uint8_t> found(2);
  std::vector<std::byte> out(kRowBytes);
  EXPECT_TRUE(c->Lookup(kTable, keys, out, found, {}).IsInvalidArgument());
  std::vector<Clock> two_clocks = {1, 2};
  EXPECT_TRUE(c->SetNextUse(kTable, keys, two_clocks).IsInvalidArgument());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2}));
  EXPECT_EQ(c->Stats().inserts, 2u);
}

TEST_F(DramCacheTest, CreateRejectsBadTablesAndOptions) {
  DramCacheOptions o;
  o.dram_bytes_max = 1024;
  EXPECT_TRUE(
      DramCache::Create(o, {{1, "a", 8}, {1, "b", 8}}, nullptr).status().IsInvalidArgument());
  EXPECT_TRUE(DramCache::Create(o, {{1, "a", 0}}, nullptr).status().IsInvalidArgument());
  auto too_big = DramCache::Create(o, {{1, "huge", 2048}}, nullptr);
  ASSERT_TRUE(too_big.status().IsInvalidArgument());
  EXPECT_NE(too_big.status().message().find("'huge'"), std::string::npos);
  o.lock_stripes = 0;
  EXPECT_TRUE(DramCache::Create(o, {{1, "a", 8}}, nullptr).status().IsInvalidArgument());
}

// Belady: with next uses known, the row used farthest in the future goes first.
TEST_F(DramCacheTest, IntentEvictsFarthestNextUseFirst) {
  auto c = MakeCache(4, DramEviction::kIntent);
  ASSERT_TRUE(Put(*c, {10, 50, 30, 20}, 1, {10, 50, 30, 20}).ok());
  ASSERT_TRUE(Put(*c, {5}, 1, {5}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{5, 10, 20, 30}));
  ASSERT_TRUE(Put(*c, {6}, 1, {6}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{5, 6, 10, 20}));
  // Negative clocks order correctly too.
  ASSERT_TRUE(Put(*c, {7, 8}, 1, {-3, 7}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{5, 6, 7, 8}));
  EXPECT_EQ(c->Stats().evictions, 4u);
}

// Rows with no next use go before any with one, least recently used first.
TEST_F(DramCacheTest, IntentEvictsRowsWithoutNextUseFirstLruAmongThem) {
  auto c = MakeCache(4, DramEviction::kIntent);
  ASSERT_TRUE(Put(*c, {1, 2, 3, 4}, 1, {100, kClockNever, kClockNever, 5}).ok());
  Get(*c, {2});  // 3 is now the least recently used row without next use
  std::vector<Key> order;
  for (Key k : {11, 12, 13, 14}) {
    auto before = ResidentKeys(*c, kTable);
    ASSERT_TRUE(Put(*c, {k}, 1, {1}).ok());
    auto after = ResidentKeys(*c, kTable);
    for (Key b : before) {
      if (!std::binary_search(after.begin(), after.end(), b)) order.push_back(b);
    }
  }
  EXPECT_EQ(order, (std::vector<Key>{3, 2, 1, 4}));
}

TEST_F(DramCacheTest, IntentBreaksNextUseTiesByLeastRecentUse) {
  auto c = MakeCache(3, DramEviction::kIntent);
  ASSERT_TRUE(Put(*c, {1, 2, 3}, 1, {7, 7, 7}).ok());
  Get(*c, {1});
  Get(*c, {3, 2});  // recency now: 1 oldest, then 3, then 2
  ASSERT_TRUE(Put(*c, {4}, 1, {1}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{2, 3, 4}));
  ASSERT_TRUE(Put(*c, {5}, 1, {1}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{2, 4, 5}));
}

TEST_F(DramCacheTest, SetNextUseReordersEviction) {
  auto c = MakeCache(3, DramEviction::kIntent);
  ASSERT_TRUE(Put(*c, {1, 2, 3}, 1, {10, 20, 30}).ok());
  std::vector<Key> keys = {1, 3, 99};
  std::vector<Clock> next = {40, kClockNever, 1};  // 99 is missing: ignored
  ASSERT_TRUE(c->SetNextUse(kTable, keys, next).ok());
  ASSERT_TRUE(Put(*c, {4}, 1, {1}).ok());  // 3 has no next use now
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2, 4}));
  ASSERT_TRUE(Put(*c, {5}, 1, {1}).ok());  // 1 (40) is farther than 2 (20)
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{2, 4, 5}));
}

TEST_F(DramCacheTest, LruModeIgnoresNextUse) {
  auto c = MakeCache(3, DramEviction::kLru);
  ASSERT_TRUE(Put(*c, {1, 2, 3}, 1, {1, 1000, kClockNever}).ok());
  Get(*c, {1});
  ASSERT_TRUE(Put(*c, {4}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 3, 4}));
  ASSERT_TRUE(Put(*c, {1}, 2).ok());  // overwrite is a use
  ASSERT_TRUE(Put(*c, {5}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 4, 5}));
}

// Lookups of many rows make their order entries stale; victim selection
// re-files them and, past kDramRefilesBeforeRebuildMin, rebuilds the order.
// Either way the eviction order is exactly the lookup order.
TEST_F(DramCacheTest, LruStaysExactWhenManyLookedUpRowsAreRefiled) {
  for (DramEviction mode : {DramEviction::kLru, DramEviction::kIntent}) {
    const uint64_t n = 3 * kDramRefilesBeforeRebuildMin;
    auto c = MakeCache(n, mode);
    std::vector<Key> keys(n);
    for (uint64_t i = 0; i < n; ++i) keys[i] = i;
    ASSERT_TRUE(Put(*c, keys).ok());
    std::vector<Key> order = keys;
    std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
    for (size_t i = 0; i < n; i += 100) {
      Get(*c, std::vector<Key>(order.begin() + i, order.begin() + std::min<size_t>(n, i + 100)));
    }
    std::vector<Key> evicted;
    for (uint64_t i = 0; i < n; ++i) {
      auto before = ResidentKeys(*c, kTable);
      ASSERT_TRUE(Put(*c, {n + i}).ok());
      auto after = ResidentKeys(*c, kTable);
      std::vector<Key> gone;
      std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                          std::back_inserter(gone));
      ASSERT_EQ(gone.size(), 1u);
      evicted.push_back(gone[0]);
      if (i == 200) break;  // the first call crossed a rebuild; the rest go in one batch
    }
    EXPECT_EQ(std::vector<Key>(order.begin(), order.begin() + evicted.size()), evicted);
    std::vector<Key> fresh(n - evicted.size());
    for (size_t i = 0; i < fresh.size(); ++i) fresh[i] = 10 * n + i;
    ASSERT_TRUE(Put(*c, fresh).ok());
    auto resident_after = ResidentKeys(*c, kTable);
    EXPECT_EQ(resident_after.size(), n);
    // Every original row is gone before any of the rows inserted after the lookups.
    EXPECT_GE(resident_after.front(), n);
  }
}

TEST_F(DramCacheTest, LfuModeEvictsLeastFrequentLruAmongEquals) {
  auto c = MakeCache(3, DramEviction::kLfu);
  ASSERT_TRUE(Put(*c, {1, 2, 3}).ok());
  Get(*c, {1, 1, 2});
  Get(*c, {1});
  // uses: 1 -> 4, 2 -> 2, 3 -> 1
  ASSERT_TRUE(Put(*c, {4}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2, 4}));
  Get(*c, {4});  // 4 -> 2 uses, more recent than 2
  ASSERT_TRUE(Put(*c, {5}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 4, 5}));
}

TEST_F(DramCacheTest, PinnedRowsAreNeverEvicted) {
  for (DramEviction mode : {DramEviction::kIntent, DramEviction::kLru, DramEviction::kLfu}) {
    auto c = MakeCache(4, mode);
    ASSERT_TRUE(Put(*c, {1, 2, 3, 4}, 1, {kClockNever, 9, 9, 9}).ok());
    std::vector<Key> pin = {1, 2, 77};
    std::vector<uint8_t> found(3);
    ASSERT_TRUE(c->Pin(kTable, pin, found).ok());
    EXPECT_EQ(found, (std::vector<uint8_t>{1, 1, 0}));
    for (Key k = 100; k < 150; ++k) ASSERT_TRUE(Put(*c, {k}, 1, {kClockNever}).ok());
    auto resident = ResidentKeys(*c, kTable);
    EXPECT_TRUE(std::binary_search(resident.begin(), resident.end(), 1));
    EXPECT_TRUE(std::binary_search(resident.begin(), resident.end(), 2));
    EXPECT_EQ(resident.size(), 4u);
    ASSERT_TRUE(c->Unpin(kTable, std::vector<Key>{1, 2}).ok());
    ASSERT_TRUE(Put(*c, {200, 201, 202, 203}).ok());
    EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{200, 201, 202, 203}));
  }
}

TEST_F(DramCacheTest, UnpinAndEraseMisuseFailWithoutChanges) {
  auto c = MakeCache(4, DramEviction::kIntent);
  ASSERT_TRUE(Put(*c, {1, 2}).ok());
  std::vector<uint8_t> found(1);
  ASSERT_TRUE(c->Pin(kTable, std::vector<Key>{1}, found).ok());
  EXPECT_TRUE(c->Unpin(kTable, std::vector<Key>{1, 1}).IsFailedPrecondition());
  EXPECT_TRUE(c->Unpin(kTable, std::vector<Key>{2}).IsFailedPrecondition());
  Status s = c->Erase(kTable, std::vector<Key>{2, 1});
  EXPECT_TRUE(s.IsFailedPrecondition()) << s.ToString();
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2}));
  ASSERT_TRUE(c->Unpin(kTable, std::vector<Key>{1, 55}).ok());
  ASSERT_TRUE(c->Erase(kTable, std::vector<Key>{2, 1, 55}).ok());
  EXPECT_TRUE(ResidentKeys(*c, kTable).empty());
  EXPECT_EQ(c->Stats().bytes_used, 0u);
}

TEST_F(DramCacheTest, PinRowsGivesStablePointersUntilUnpin) {
  auto c = MakeCache(4, DramEviction::kLru);
  ASSERT_TRUE(Put(*c, {1, 2}, 3).ok());
  std::vector<uint8_t> found(2);
  std::vector<const std::byte*> ptrs(2);
  ASSERT_TRUE(c->PinRows(kTable, std::vector<Key>{2, 8}, found, ptrs).ok());
  ASSERT_EQ(found, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(ptrs[1], nullptr);
  for (Key k = 10; k < 40; ++k) ASSERT_TRUE(Put(*c, {k}, 3).ok());
  EXPECT_EQ(testing::RowVersion(2, {ptrs[0], kRowBytes}), 3);
  ASSERT_TRUE(c->Unpin(kTable, std::vector<Key>{2}).ok());
}

TEST_F(DramCacheTest, ForEachReportsDirtyFlagsAndStopsOnError) {
  auto c = MakeCache(8, DramEviction::kIntent);
  ASSERT_TRUE(Put(*c, {1, 2, 3}, 2, {}, {0, 1, 0}).ok());
  int dirty_rows = 0, visited = 0;
  ASSERT_TRUE(c->ForEach(kTable, [&](Key k, std::span<const std::byte> row, bool dirty) {
                 EXPECT_EQ(testing::RowVersion(k, row), 2);
                 dirty_rows += dirty;
                 ++visited;
                 return Status::Ok();
               }).ok());
  EXPECT_EQ(visited, 3);
  EXPECT_EQ(dirty_rows, 1);
  Status s = c->ForEach(
      kTable, [](Key, std::span<const std::byte>, bool) { return Status::Internal("stop"); });
  EXPECT_TRUE(s.IsInternal());
}

TEST_F(DramCacheTest, IndexBytesPerRowStayBounded) {
  auto c = MakeCache(1 << 16, DramEviction::kIntent);
  std::vector<Key> keys(1 << 16);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 0x9e3779b97f4a7c15ull;
  ASSERT_TRUE(Put(*c, keys).ok());
  DramCacheStats s = c->Stats();
  double per_row = double(s.index_bytes) / double(s.rows);
  EXPECT_GT(per_row, 56.0);   // at least the slot header and metadata
  EXPECT_LT(per_row, 200.0);  // index + metadata + eviction order node
}

}  // namespace
}  // namespace strata::storage
