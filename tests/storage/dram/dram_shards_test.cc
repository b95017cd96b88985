// strata-test-labels: unit
// The DRAM cache in shards: the automatic count and bad counts, rows that
// round-trip across shards, the budget they share (the cache fills to it
// though keys split unevenly), each shard evicting its own farthest next uses
// (the approximation of the one exact order, shown on a case where the two
// differ), InsertInPieces reporting exactly which rows went in when a later
// shard fails, and moves up, next uses, clean-ahead and flushes spanning
// shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "storage/dram/dram_cache.h"
#include "storage/dram/dram_index.h"
#include "storage/dram/limits.h"
#include "tests/storage/dram/dram_test_util.h"
#include "tests/storage/ssd/memory_row_store.h"

namespace strata::storage {
namespace {

using testing::MakeRow;
using testing::MemoryRowStore;
using testing::RowVersion;
using DramShardsTest = testing::DramCacheFixture;

// The shard of a key in a cache of `shards` shards (the cache's rule).
uint32_t ShardOfKey(Key key, uint32_t shards) {
  return static_cast<uint32_t>(DramKeyHash(key) >> kDramShardHashShift) & (shards - 1);
}

// The first `count` keys from `from` on that fall in shard `shard` of `shards`.
std::vector<Key> KeysOfShard(uint32_t shard, uint32_t shards, uint64_t count, Key from = 1) {
  std::vector<Key> keys;
  for (Key k = from; keys.size() < count; ++k) {
    if (ShardOfKey(k, shards) == shard) keys.push_back(k);
  }
  return keys;
}

DramCacheOptions Sharded(uint32_t shards) {
  DramCacheOptions o;
  o.shards = shards;
  return o;
}

TEST_F(DramShardsTest, AutomaticCountGivesEachShardAQuarterMillionRows) {
  DramCacheOptions o;
  o.huge_pages = false;
  const uint64_t per = kDramShardRowsMin;
  for (auto [rows, want] : std::vector<std::pair<uint64_t, uint32_t>>{
           {100, 1}, {2 * per - 1, 1}, {2 * per, 2}, {4 * per + 5, 4}, {64 * per, 16}}) {
    o.dram_bytes_max = rows * kRowBytes;
    auto made = DramCache::Create(o, OneTable(), nullptr);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    EXPECT_EQ((*made)->shards(), want) << rows << " rows";
    // The shards' budgets add up to at most the whole.
    EXPECT_LE((*made)->Stats().rows_max, rows);
    EXPECT_GE((*made)->Stats().rows_max, rows - want);
  }
  // An explicit count is kept, small cache or not.
  auto made = MakeCache(64, nullptr, OneTable(), Sharded(4));
  ASSERT_NE(made, nullptr);
  EXPECT_EQ(made->shards(), 4u);
}

TEST_F(DramShardsTest, BadShardCountsAreErrorsNamingThem) {
  for (uint32_t shards : {3u, 6u, 128u}) {
    DramCacheOptions o = Sharded(shards);
    o.dram_bytes_max = 1 << 20;
    auto made = DramCache::Create(o, OneTable(), nullptr);
    ASSERT_FALSE(made.ok()) << shards;
    EXPECT_TRUE(made.status().IsInvalidArgument());
    EXPECT_NE(made.status().ToString().find("shards " + std::to_string(shards)), std::string::npos)
        << made.status().ToString();
  }
  // A row larger than a shard's share of the budget.
  DramCacheOptions o = Sharded(8);
  o.dram_bytes_max = 4 * kRowBytes;
  auto made = DramCache::Create(o, OneTable(), nullptr);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().ToString().find("table 'emb'"), std::string::npos)
      << made.status().ToString();
  EXPECT_NE(made.status().ToString().find("8 shards"), std::string::npos)
      << made.status().ToString();
}

TEST_F(DramShardsTest, RowsRoundTripAcrossShards) {
  auto c = MakeCache(4000, nullptr, OneTable(), Sharded(4));
  ASSERT_NE(c, nullptr);
  std::vector<Key> keys;
  for (Key k = 0; k < 3000; ++k) keys.push_back(k * 7919 + 3);
  std::set<uint32_t> shards_used;
  for (Key k : keys) shards_used.insert(ShardOfKey(k, 4));
  ASSERT_EQ(shards_used.size(), 4u);
  for (size_t at = 0; at < keys.size(); at += 500) {
    ASSERT_TRUE(Put(*c, {keys.begin() + at, keys.begin() + at + 500}, 3).ok());
  }
  // Every key back at its position, between absent ones.
  std::vector<Key> asked;
  for (size_t i = 0; i < keys.size(); ++i) {
    asked.push_back(keys[i]);
    if (i % 3 == 0) asked.push_back(keys[i] + 1);  // never inserted
  }
  std::vector<std::byte> rows(asked.size() * kRowBytes);
  std::vector<uint8_t> found(asked.size()), dirty(asked.size(), 9);
  ASSERT_TRUE(c->Lookup(kTable, asked, rows, found, dirty).ok());
  uint64_t hits = 0;
  for (size_t i = 0; i < asked.size(); ++i) {
    const bool inserted = asked[i] % 7919 == 3;
    ASSERT_EQ(found[i], inserted ? 1 : 0) << "key " << asked[i];
    EXPECT_EQ(dirty[i], 0) << "key " << asked[i];
    if (!inserted) continue;
    ++hits;
    EXPECT_EQ(RowVersion(asked[i], {rows.data() + i * kRowBytes, kRowBytes}), 3)
        << "key " << asked[i];
  }
  const DramCacheStats st = c->Stats();
  EXPECT_EQ(st.rows, keys.size());
  EXPECT_EQ(st.hits, hits);
  EXPECT_EQ(st.misses, asked.size() - hits);
  EXPECT_EQ(st.bytes_used, keys.size() * kRowBytes);
  EXPECT_EQ(st.bytes_max, 4000u * kRowBytes);
  std::vector<Key> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(ResidentKeys(*c, kTable), sorted);
  // Spans of the wrong size are errors naming them, as with one shard, and
  // an Insert's are checked before any shard takes a row: nothing changes.
  std::vector<uint8_t> short_found(asked.size() - 1);
  Status s = c->Lookup(kTable, asked, rows, short_found, {});
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.ToString().find("found"), std::string::npos) << s.ToString();
  std::vector<Key> fresh;
  for (Key k = 1; k <= 64; ++k) fresh.push_back(k * 7919 + 5);
  auto fresh_rows = testing::MakeRows(fresh, 4, kRowBytes);
  const std::vector<uint8_t> short_dirty(fresh.size() - 1, 1);
  s = c->Insert(kTable, fresh, fresh_rows, short_dirty, {});
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.ToString().find("dirty"), std::string::npos) << s.ToString();
  fresh_rows.pop_back();
  std::vector<uint8_t> placed(fresh.size(), 1);
  s = c->InsertInPieces(kTable, fresh, fresh_rows, {}, {}, placed);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.ToString().find("rows (bytes)"), std::string::npos) << s.ToString();
  EXPECT_EQ(placed, std::vector<uint8_t>(fresh.size(), 0));
  EXPECT_EQ(Get(*c, fresh), std::vector<uint8_t>(fresh.size(), 0));
  EXPECT_EQ(c->Stats().rows, keys.size());
}

TEST_F(DramShardsTest, EachShardEvictsItsOwnFarthestNextUses) {
  // Two shards of 100 rows. Shard 0's rows are used soon (clocks 0..99),
  // shard 1's late (1000..1099). Twenty new rows, ten per shard: the exact
  // order of one cache would evict shard 1's twenty farthest; the shards
  // each evict their own ten farthest.
  auto c = MakeCache(200, nullptr, OneTable(), Sharded(2));
  ASSERT_NE(c, nullptr);
  const std::vector<Key> a = KeysOfShard(0, 2, 110), b = KeysOfShard(1, 2, 110);
  const std::vector<Key> old_a(a.begin(), a.begin() + 100), old_b(b.begin(), b.begin() + 100);
  std::vector<Clock> use_a, use_b;
  for (Clock i = 0; i < 100; ++i) {
    use_a.push_back(i);
    use_b.push_back(1000 + i);
  }
  ASSERT_TRUE(Put(*c, old_a, 1, use_a).ok());
  ASSERT_TRUE(Put(*c, old_b, 1, use_b).ok());
  ASSERT_EQ(c->Stats().evictions, 0u);
  std::vector<Key> fresh(a.begin() + 100, a.end());
  fresh.insert(fresh.end(), b.begin() + 100, b.end());
  ASSERT_TRUE(Put(*c, fresh, 1, std::vector<Clock>(fresh.size(), 5)).ok());
  EXPECT_EQ(c->Stats().evictions, 20u);
  std::vector<Key> want(old_a.begin(), old_a.begin() + 90);    // 90..99 left
  want.insert(want.end(), old_b.begin(), old_b.begin() + 90);  // 1090..1099 left
  want.insert(want.end(), fresh.begin(), fresh.end());
  std::sort(want.begin(), want.end());
  EXPECT_EQ(ResidentKeys(*c, kTable), want);
  // SetNextUse moves a row to the front of its shard's order.
  const std::vector<Key> never = {old_a[0], old_b[0]};
  ASSERT_TRUE(c->SetNextUse(kTable, never, std::vector<Clock>(2, kClockNever)).ok());
  const std::vector<Key> more = {KeysOfShard(0, 2, 1, a.back() + 1)[0],
                                 KeysOfShard(1, 2, 1, b.back() + 1)[0]};
  ASSERT_TRUE(Put(*c, more, 1, {5, 5}).ok());
  EXPECT_EQ(Get(*c, {old_a[0], old_b[0], old_a[1], old_b[1]}), (std::vector<uint8_t>{0, 0, 1, 1}));
}

TEST_F(DramShardsTest, TheShardsShareTheBudgetSoTheCacheFillsToIt) {
  // Four shards over 400 rows: each owns 87.5 rows' bytes, the other 50
  // are shared. The keys split 130 / 90 / 90 / 90: every row fits, though
  // shard 0 has 30 more than a quarter of the budget.
  auto c = MakeCache(400, nullptr, OneTable(), Sharded(4));
  ASSERT_NE(c, nullptr);
  std::vector<std::vector<Key>> by_shard;
  for (uint32_t s = 0; s < 4; ++s) by_shard.push_back(KeysOfShard(s, 4, 200));
  const auto first = [&](uint32_t s, size_t from, size_t count) {
    return std::vector<Key>(by_shard[s].begin() + from, by_shard[s].begin() + from + count);
  };
  ASSERT_TRUE(Put(*c, first(0, 0, 130), 1).ok());
  for (uint32_t s = 1; s < 4; ++s) ASSERT_TRUE(Put(*c, first(s, 0, 90), 1).ok());
  DramCacheStats st = c->Stats();
  EXPECT_EQ(st.evictions, 0u);
  EXPECT_EQ(st.rows, 400u);
  EXPECT_EQ(st.rows_max, 400u);
  EXPECT_EQ(st.bytes_used, st.bytes_max);
  EXPECT_EQ(Get(*c, first(0, 0, 130)), std::vector<uint8_t>(130, 1));

  // The budget is full: a new row in shard 1 evicts one of shard 1's.
  ASSERT_TRUE(Put(*c, first(1, 90, 1), 1).ok());
  EXPECT_EQ(c->Stats().evictions, 1u);
  EXPECT_EQ(Get(*c, first(0, 0, 130)), std::vector<uint8_t>(130, 1));

  // Rows erased from shard 0 give their bytes back: shard 1 then takes 40
  // more rows without evicting.
  ASSERT_TRUE(c->Erase(kTable, first(0, 0, 40)).ok());
  ASSERT_TRUE(Put(*c, first(1, 91, 40), 1).ok());
  st = c->Stats();
  EXPECT_EQ(st.evictions, 1u);
  EXPECT_EQ(st.rows, 400u);
  EXPECT_EQ(st.bytes_used, st.bytes_max);
  EXPECT_EQ(Get(*c, first(1, 91, 40)), std::vector<uint8_t>(40, 1));

  // Shard 0 is now within its own bytes (90 rows) and the pool is empty: it
  // still takes a batch of its own size by evicting its own rows.
  ASSERT_TRUE(Put(*c, first(0, 130, 60), 2).ok());
  st = c->Stats();
  EXPECT_EQ(st.rows, 400u);
  EXPECT_EQ(st.bytes_used, st.bytes_max);
  EXPECT_EQ(Get(*c, first(0, 130, 60)), std::vector<uint8_t>(60, 1));
  EXPECT_EQ(Get(*c, first(1, 0, 131)).size(), 131u);
  uint64_t shard1 = 0;
  for (uint8_t f : Get(*c, first(1, 0, 131))) shard1 += f;
  EXPECT_EQ(shard1, 130u);  // shard 1 lost only the row it evicted itself
}

TEST_F(DramShardsTest, BorrowedBytesStayWhileTheirRowsMayStay) {
  // Inserts the keys one at a time (each borrows what it needs as it goes).
  auto put_each = [](DramCache& c, const std::vector<Key>& keys, uint8_t dirty,
                     TableId table = kTable, uint32_t row_bytes = kRowBytes) {
    for (Key k : keys) STRATA_RETURN_IF_ERROR(Put(c, {k}, 1, {}, {dirty}, table, row_bytes));
    return Status::Ok();
  };
  // Two shards over 64 rows: each owns 28, the pool holds 8.
  MemoryRowStore store(OneTable());
  DramCacheOptions o = Sharded(2);
  o.transit_rows_max = 8;
  auto c = MakeCache(64, &store, OneTable(), o);
  ASSERT_NE(c, nullptr);
  const std::vector<Key> a = KeysOfShard(0, 2, 100), b = KeysOfShard(1, 2, 100);
  ASSERT_TRUE(put_each(*c, {a.begin(), a.begin() + 36}, 0).ok());  // 8 rows borrowed
  // Rows in a move up may stay (moved = false): an Erase meanwhile gives
  // back only what no row of shard 0 may still need.
  const std::vector<Key> up(a.begin() + 30, a.begin() + 34);
  DramCache::MoveUp move;
  ASSERT_TRUE(c->BeginMoveUp(kTable, up, &move).ok());
  ASSERT_TRUE(c->Erase(kTable, std::vector<Key>{a[0]}).ok());
  ASSERT_TRUE(put_each(*c, {b.begin(), b.begin() + 40}, 0).ok());
  ASSERT_TRUE(c->EndMoveUp(kTable, up, &move, /*moved=*/false).ok());
  DramCacheStats st = c->Stats();
  EXPECT_LE(st.bytes_used, st.bytes_max);
  EXPECT_EQ(Get(*c, up), std::vector<uint8_t>(up.size(), 1));
}

TEST_F(DramShardsTest, VictimsOfAFailedWriteBackKeepTheirBorrowedBytes) {
  // Inserts the keys one at a time (each borrows what it needs as it goes).
  auto put_each = [](DramCache& c, const std::vector<Key>& keys, uint8_t dirty,
                     TableId table = kTable, uint32_t row_bytes = kRowBytes) {
    for (Key k : keys) STRATA_RETURN_IF_ERROR(Put(c, {k}, 1, {}, {dirty}, table, row_bytes));
    return Status::Ok();
  };
  // Rows of 32 and 64 bytes over a 64-row (2048-byte) budget in two shards:
  // each owns 896 bytes, the pool 256. Shard 0 fills with 18 dirty 64-byte
  // rows (borrowing the whole pool); a 32-byte row then evicts one of them,
  // whose write-back fails: the victim stays, and so do the bytes it needs,
  // though the new row would have left 32 of them over.
  const std::vector<TableSpec> tables = {{kTable, "small", 32}, {8, "large", 64}};
  MemoryRowStore store(tables);
  auto c = MakeCache(64, &store, tables, Sharded(2));
  ASSERT_NE(c, nullptr);
  const std::vector<Key> a = KeysOfShard(0, 2, 100), b = KeysOfShard(1, 2, 100);
  ASSERT_TRUE(put_each(*c, {a.begin(), a.begin() + 18}, 1, 8, 64).ok());
  ASSERT_EQ(c->Stats().bytes_used, 18u * 64);
  store.FailNextPuts(1);
  EXPECT_TRUE(Put(*c, {a[50]}, 1, {}, {0}).IsIOError());
  // Shard 1 takes what is left: its own bytes, no more.
  ASSERT_TRUE(put_each(*c, {b.begin(), b.begin() + 40}, 0).ok());
  DramCacheStats st = c->Stats();
  EXPECT_LE(st.bytes_used, st.bytes_max);
  EXPECT_EQ(st.bytes_used, 18u * 64 + 28 * 32);
}

TEST_F(DramShardsTest, InsertInPiecesReportsTheRowsOfTheShardsThatTookThem) {
  // Shard s0 (where the batch starts: its first key's shard) holds clean
  // rows, s1 dirty ones; the store fails the next write. s0 evicts without
  // writing and takes its rows; s1's write-back fails, so s1 takes none.
  MemoryRowStore store(OneTable());
  auto c = MakeCache(40, &store, OneTable(), Sharded(2));
  ASSERT_NE(c, nullptr);
  const std::vector<Key> a = KeysOfShard(0, 2, 30), b = KeysOfShard(1, 2, 30);
  ASSERT_TRUE(Put(*c, {a.begin(), a.begin() + 20}, 1, {}, std::vector<uint8_t>(20, 0)).ok());
  ASSERT_TRUE(Put(*c, {b.begin(), b.begin() + 20}, 1, {}, std::vector<uint8_t>(20, 1)).ok());
  std::vector<Key> fresh;
  for (int i = 20; i < 30; ++i) {  // interleaved, shard 0's first
    fresh.push_back(a[i]);
    fresh.push_back(b[i]);
  }
  ASSERT_EQ(ShardOfKey(fresh[0], 2), 0u);
  store.FailNextPuts(1);
  auto rows = testing::MakeRows(fresh, 2, kRowBytes);
  std::vector<uint8_t> placed(fresh.size(), 7);
  Status s = c->InsertInPieces(kTable, fresh, rows, {}, {}, placed);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  const std::vector<uint8_t> found = Get(*c, fresh);
  for (size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_EQ(placed[i], i % 2 == 0 ? 1 : 0) << "key " << fresh[i];
    EXPECT_EQ(found[i], placed[i]) << "key " << fresh[i];
  }
  // Shard 1 kept its dirty rows.
  EXPECT_EQ(DirtyFlags(*c, {b.begin(), b.begin() + 20}), std::vector<uint8_t>(20, 1));
}

TEST_F(DramShardsTest, MovesUpCleaningAndFlushesSpanShards) {
  MemoryRowStore store(OneTable());
  DramCacheOptions o = Sharded(4);
  o.transit_rows_max = 8;
  auto c = MakeCache(400, &store, OneTable(), o);
  ASSERT_NE(c, nullptr);
  std::vector<Key> keys;
  for (Key k = 1; k <= 200; ++k) keys.push_back(k);
  ASSERT_TRUE(Put(*c, keys, 1, {}, std::vector<uint8_t>(keys.size(), 1)).ok());

  // A move up of present and absent keys over every shard.
  const std::vector<Key> up = {3, 50, 99, 100, 160, 5000, 6000};
  DramCache::MoveUp move;
  ASSERT_TRUE(c->BeginMoveUp(kTable, up, &move).ok());
  EXPECT_EQ(move.pinned, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(move.bytes, 5u * kRowBytes);
  uint64_t sum = 0;
  for (uint64_t b : move.shard_bytes) sum += b;
  EXPECT_EQ(sum, move.bytes);
  DramCache::MoveUp wrong = move;
  wrong.pinned.pop_back();
  EXPECT_TRUE(c->EndMoveUp(kTable, up, &wrong, true).IsInvalidArgument());
  ASSERT_TRUE(c->EndMoveUp(kTable, up, &move, /*moved=*/true).ok());
  EXPECT_EQ(Get(*c, up), std::vector<uint8_t>(up.size(), 0));
  EXPECT_EQ(c->Stats().rows, 195u);

  // Clean-ahead over every shard's next victims: all of them are dirty.
  Result<uint64_t> cleaned = c->CleanAhead(400, 400);
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_EQ(*cleaned, 195u);
  EXPECT_EQ(store.Rows(kTable).size(), 195u);
  // New dirty rows in every shard, then a flush writes them all.
  ASSERT_TRUE(Put(*c, keys, 2, {}, std::vector<uint8_t>(keys.size(), 1)).ok());
  ASSERT_TRUE(c->FlushDirty().ok());
  const auto stored = store.Rows(kTable);
  EXPECT_EQ(stored.size(), 200u);
  for (Key k : keys) {
    ASSERT_TRUE(stored.count(k)) << k;
    EXPECT_EQ(stored.at(k), MakeRow(k, 2, kRowBytes)) << k;
  }
  EXPECT_EQ(DirtyFlags(*c, keys), std::vector<uint8_t>(keys.size(), 0));
  // Erase across shards.
  const std::vector<Key> gone = {1, 2, 3, 4, 5, 6, 7, 8};
  ASSERT_TRUE(c->Erase(kTable, gone).ok());
  EXPECT_EQ(c->Stats().rows, 192u);
}

}  // namespace
}  // namespace strata::storage
