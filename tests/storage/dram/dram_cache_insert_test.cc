// strata-test-labels: unit
// Insert's side of the DRAM cache: room, write-back of dirty victims, its
// failures, FlushDirty and capacity shared across tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <unordered_map>

#include "storage/dram/dram_cache.h"
#include "storage/dram/limits.h"
#include "tests/storage/dram/dram_test_util.h"
#include "tests/storage/ssd/memory_row_store.h"

namespace strata::storage {
namespace {

using testing::MakeRow;
using testing::MemoryRowStore;
using DramCacheTest = testing::DramCacheFixture;

TEST_F(DramCacheTest, AllPinnedInsertIsResourceExhaustedAndChangesNothing) {
  MemoryRowStore store(OneTable());
  auto c = MakeCache(2, &store);
  ASSERT_TRUE(Put(*c, {1, 2}, 1, {}, {1, 1}).ok());
  // Rows moving up (pinned) are no victims.
  DramCache::MoveUp move1, move2;
  ASSERT_TRUE(c->BeginMoveUp(kTable, std::vector<Key>{1}, &move1).ok());
  ASSERT_TRUE(c->BeginMoveUp(kTable, std::vector<Key>{2}, &move2).ok());
  DramCacheStats before = c->Stats();
  Status s = Put(*c, {3});
  ASSERT_TRUE(s.IsResourceExhausted()) << s.ToString();
  EXPECT_NE(s.message().find("'emb'"), std::string::npos) << s.ToString();
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2}));
  DramCacheStats after = c->Stats();
  EXPECT_EQ(after.evictions, before.evictions);
  EXPECT_EQ(after.bytes_used, before.bytes_used);
  EXPECT_EQ(store.put_calls(), 0u);
  // One move ended: the other row is still protected.
  ASSERT_TRUE(c->EndMoveUp(kTable, std::vector<Key>{2}, &move2, /*moved=*/false).ok());
  ASSERT_TRUE(Put(*c, {3}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 3}));
  // A batch larger than the whole capacity cannot fit either.
  ASSERT_TRUE(c->EndMoveUp(kTable, std::vector<Key>{1}, &move1, /*moved=*/false).ok());
  EXPECT_TRUE(Put(*c, {7, 8, 9}).IsResourceExhausted());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 3}));
}

TEST_F(DramCacheTest, DirtyVictimsAreWrittenBackInOneBatchPerTable) {
  MemoryRowStore store(OneTable());
  auto c = MakeCache(4, &store);
  ASSERT_TRUE(Put(*c, {1, 2, 3, 4}, 5, {}, {1, 0, 1, 1}).ok());
  ASSERT_TRUE(Put(*c, {8, 9, 10}, 6).ok());  // evicts 1 (dirty), 2 (clean), 3 (dirty)
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{4, 8, 9, 10}));
  EXPECT_EQ(store.put_calls(), 1u);
  auto rows = store.Rows(kTable);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows.at(1), MakeRow(1, 5, kRowBytes));
  EXPECT_EQ(rows.at(3), MakeRow(3, 5, kRowBytes));
  EXPECT_EQ(c->Stats().dirty_writebacks, 2u);
  EXPECT_EQ(c->Stats().evictions, 3u);
}

TEST_F(DramCacheTest, FailedWriteBackKeepsVictimsDirtyAndInsertsNothing) {
  MemoryRowStore store(OneTable());
  auto c = MakeCache(2, &store);
  ASSERT_TRUE(Put(*c, {1, 2}, 5, {}, {1, 1}).ok());
  store.FailNextPuts(1, /*prefix_rows=*/1);
  Status s = Put(*c, {3, 4}, 6);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("'emb'"), std::string::npos) << s.ToString();
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2}));
  EXPECT_EQ(DirtyFlags(*c, {1, 2}), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(c->Stats().writeback_errors, 1u);
  // The store recovered: the retry writes both victims back.
  ASSERT_TRUE(Put(*c, {3, 4}, 6).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{3, 4}));
  EXPECT_EQ(store.Rows(kTable).at(2), MakeRow(2, 5, kRowBytes));
  EXPECT_EQ(store.Rows(kTable).at(1), MakeRow(1, 5, kRowBytes));
}

TEST_F(DramCacheTest, InsertInPiecesTakesABatchLargerThanTheCache) {
  MemoryRowStore store(OneTable());
  auto c = MakeCache(2, &store);
  const std::vector<Key> keys{1, 2, 3, 4, 5};
  auto rows = testing::MakeRows(keys, 5, kRowBytes);
  std::vector<uint8_t> placed(5, 0);
  const std::vector<Clock> next_use{5, 4, 3, 2, 1};
  ASSERT_TRUE(
      c->InsertInPieces(kTable, keys, rows, std::vector<uint8_t>(5, 1), next_use, placed).ok());
  EXPECT_EQ(placed, (std::vector<uint8_t>{1, 1, 1, 1, 1}));
  // Pieces {1, 2}, {3, 4}, {5}: each evicted the rows used farthest ahead,
  // writing them back since they were dirty.
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{4, 5}));
  for (Key k : {1, 2, 3}) EXPECT_EQ(store.Rows(kTable).at(k), MakeRow(k, 5, kRowBytes)) << k;
  EXPECT_EQ(store.put_calls(), 2u);  // {1, 2} for the second piece, {3} for the third
}

TEST_F(DramCacheTest, InsertInPiecesStopsAtTheFirstFailedPiece) {
  MemoryRowStore store(OneTable());
  auto c = MakeCache(2, &store);
  const std::vector<Key> keys{1, 2, 3, 4, 5};
  auto rows = testing::MakeRows(keys, 5, kRowBytes);
  store.FailNextPuts(1);  // the second piece cannot write the first back
  std::vector<uint8_t> placed(5, 9);
  Status s = c->InsertInPieces(kTable, keys, rows, std::vector<uint8_t>(5, 1), {}, placed);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(placed, (std::vector<uint8_t>{1, 1, 0, 0, 0}));
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2}));
  EXPECT_EQ(DirtyFlags(*c, {1, 2}), (std::vector<uint8_t>{1, 1}));
  // Spans of the wrong size: nothing placed.
  s = c->InsertInPieces(kTable, keys, rows, std::vector<uint8_t>(4, 1), {}, placed);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(placed, (std::vector<uint8_t>(5, 0)));
  // A placed span of the wrong size: an error naming it.
  std::vector<uint8_t> short_placed(4, 0);
  s = c->InsertInPieces(kTable, keys, rows, {}, {}, short_placed);
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_NE(s.ToString().find("placed"), std::string::npos) << s.ToString();
}

TEST_F(DramCacheTest, WithoutBackingDirtyRowsAreNeverEvicted) {
  auto c = MakeCache(3);
  ASSERT_TRUE(Put(*c, {1, 2, 3}, 1, {}, {1, 0, 1}).ok());
  ASSERT_TRUE(Put(*c, {4}).ok());  // 2 is the only clean row
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 3, 4}));
  ASSERT_TRUE(Put(*c, {4}, 1, {}, {1}).ok());  // now dirty too
  EXPECT_TRUE(Put(*c, {5}).IsResourceExhausted());
  EXPECT_TRUE(c->FlushDirty().IsFailedPrecondition());
  // Overwriting a dirty row with a clean copy makes it evictable again.
  ASSERT_TRUE(Put(*c, {1}, 2, {}, {0}).ok());
  ASSERT_TRUE(Put(*c, {5}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{3, 4, 5}));
}

TEST_F(DramCacheTest, FlushDirtyWritesInBoundedBatchesAndMarksClean) {
  MemoryRowStore store(OneTable());
  const uint64_t n = kDramFlushBatchRowsMax + 10;
  auto c = MakeCache(n, &store);
  std::vector<Key> keys(n);
  for (uint64_t i = 0; i < n; ++i) keys[i] = i * 3;
  ASSERT_TRUE(Put(*c, keys, 4, {}, std::vector<uint8_t>(n, 1)).ok());
  store.FailNextPuts(1);
  EXPECT_TRUE(c->FlushDirty().IsIOError());
  EXPECT_EQ(DirtyFlags(*c, keys), std::vector<uint8_t>(n, 1));
  ASSERT_TRUE(c->FlushDirty().ok());
  EXPECT_EQ(store.put_calls(), 3u);  // one failed, then two batches
  EXPECT_EQ(DirtyFlags(*c, keys), std::vector<uint8_t>(n, 0));
  auto rows = store.Rows(kTable);
  ASSERT_EQ(rows.size(), n);
  EXPECT_EQ(rows.at(keys.back()), MakeRow(keys.back(), 4, kRowBytes));
  EXPECT_EQ(c->Stats().dirty_writebacks, n);
}

TEST_F(DramCacheTest, CapacityIsSharedAcrossTablesInBytes) {
  std::vector<TableSpec> tables = {{1, "small", 16}, {2, "large", 48}};
  DramCacheOptions o;
  o.dram_bytes_max = 96;
  auto made = DramCache::Create(o, tables, nullptr);
  ASSERT_TRUE(made.ok());
  DramCache& c = **made;
  ASSERT_TRUE(Put(c, {1, 2, 3, 4, 5, 6}, 1, {}, {}, 1, 16).ok());
  EXPECT_EQ(c.Stats().rows_max, 6u);
  ASSERT_TRUE(Put(c, {9}, 1, {}, {}, 2, 48).ok());  // frees three small rows
  EXPECT_EQ(ResidentKeys(c, 1), (std::vector<Key>{4, 5, 6}));
  EXPECT_EQ(ResidentKeys(c, 2), (std::vector<Key>{9}));
  EXPECT_EQ(c.Stats().bytes_used, 96u);
  ASSERT_TRUE(Put(c, {10}, 1, {}, {}, 2, 48).ok());
  EXPECT_TRUE(ResidentKeys(c, 1).empty());
  EXPECT_EQ(ResidentKeys(c, 2), (std::vector<Key>{9, 10}));
}

// Which slot a new row takes decides where it lies in the arena and which
// of rows with equal codes leaves first later (slot order), so Insert keeps
// it exact: each new row (in key order, the last duplicate winning) takes
// the slot of one of this Insert's victims, the last popped first, then a
// free slot (last freed first), then a slot never used. A model of that
// (victims: the farthest next uses, every clock distinct; rows to
// overwrite keep their slot and are no victims) against ForEach, which
// walks the slots in order, after each of 1,500 batches of new keys,
// overwrites and duplicates, and erases; every row holds its newest bytes.
TEST_F(DramCacheTest, NewRowsTakeTheVictimsSlotsLastPoppedFirst) {
  const uint64_t cap = 3 * kDramFrontRowsMin;  // sweeps, the late queue
  auto c = MakeCache(cap);
  struct Row {
    Key key;
    Clock next_use;
    uint64_t version;
  };
  std::map<uint32_t, Row> at;  // slot -> row
  std::unordered_map<Key, uint32_t> slot_of;
  std::vector<uint32_t> free_slots;  // back: the next to reuse
  uint32_t touched = 0;
  std::mt19937_64 rng(29);
  std::set<Clock> used;
  auto fresh_clock = [&] {
    while (true) {
      Clock x = static_cast<Clock>(rng() % (uint64_t{1} << 18));
      if (used.insert(x).second) return x;
    }
  };
  auto resident_key = [&] {
    auto it = at.lower_bound(static_cast<uint32_t>(rng() % touched));
    return (it == at.end() ? at.begin() : it)->second.key;
  };
  Key next_key = 1;
  for (int op = 0; op < 1500; ++op) {
    const uint64_t version = static_cast<uint64_t>(op) + 1;
    if (!at.empty() && rng() % 8 == 0) {  // erase a few resident keys
      std::vector<Key> keys;
      for (uint64_t i = rng() % 40; i-- > 0;) keys.push_back(resident_key());
      ASSERT_TRUE(c->Erase(kTable, keys).ok());
      for (Key k : keys) {
        auto it = slot_of.find(k);
        if (it == slot_of.end()) continue;  // a duplicate, gone already
        free_slots.push_back(it->second);
        at.erase(it->second);
        slot_of.erase(it);
      }
    } else {
      std::vector<Key> keys;
      std::vector<Clock> clocks;
      const uint64_t n = 1 + rng() % 300;
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t kind = rng() % 10;
        if (kind < 2 && !at.empty()) {
          keys.push_back(resident_key());  // an overwrite
        } else if (kind < 3 && !keys.empty()) {
          keys.push_back(keys[rng() % keys.size()]);  // a duplicate
        } else {
          keys.push_back(next_key++);
        }
        clocks.push_back(fresh_clock());
      }
      ASSERT_TRUE(Put(*c, keys, version, clocks).ok()) << "op " << op;
      // The model: picks are the last occurrences, in key order.
      std::unordered_map<Key, size_t> last;
      for (size_t i = 0; i < n; ++i) last[keys[i]] = i;
      std::vector<size_t> fresh;
      std::set<Key> overwrites;
      for (size_t i = 0; i < n; ++i) {
        if (last[keys[i]] != i) continue;
        if (slot_of.count(keys[i]) != 0) {
          overwrites.insert(keys[i]);
        } else {
          fresh.push_back(i);
        }
      }
      std::vector<std::pair<Clock, uint32_t>> by_use;  // rows that may leave
      for (const auto& [slot, row] : at) {
        if (overwrites.count(row.key) == 0) by_use.push_back({row.next_use, slot});
      }
      std::sort(by_use.rbegin(), by_use.rend());  // the farthest first
      const uint64_t rows = at.size() + fresh.size();
      const size_t m = rows > cap ? rows - cap : 0;
      ASSERT_LE(m, by_use.size());
      std::vector<uint32_t> victims;
      for (size_t v = 0; v < m; ++v) {
        victims.push_back(by_use[v].second);
        slot_of.erase(at[by_use[v].second].key);
        at.erase(by_use[v].second);
      }
      for (Key k : overwrites) {
        const size_t i = last[k];
        at[slot_of[k]] = {k, clocks[i], version};
      }
      for (size_t i : fresh) {
        uint32_t slot;
        if (!victims.empty()) {
          slot = victims.back();
          victims.pop_back();
        } else if (!free_slots.empty()) {
          slot = free_slots.back();
          free_slots.pop_back();
        } else {
          slot = touched++;
        }
        at[slot] = {keys[i], clocks[i], version};
        slot_of[keys[i]] = slot;
      }
    }
    std::vector<std::pair<Key, uint64_t>> walked, model;
    ASSERT_TRUE(c->ForEach(kTable, [&](Key k, std::span<const std::byte> row, bool) {
                   walked.push_back({k, static_cast<uint64_t>(testing::RowVersion(k, row))});
                   return Status::Ok();
                 }).ok());
    for (const auto& [slot, row] : at) model.push_back({row.key, row.version});
    ASSERT_EQ(walked, model) << "op " << op;
  }
  EXPECT_GT(c->Stats().evictions, 10 * cap);
}

}  // namespace
}  // namespace strata::storage
