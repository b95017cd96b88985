// strata-test-labels: unit
#include "storage/dram/dram_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>

#include "storage/dram/dram_index.h"
#include "storage/dram/limits.h"
#include "tests/storage/dram/dram_test_util.h"

namespace strata::storage {
namespace {

using testing::MakeRow;
using testing::MakeRows;
using DramCacheTest = testing::DramCacheFixture;

TEST_F(DramCacheTest, EveryKeyIsValidAndRowsRoundTrip) {
  auto c = MakeCache(16);
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

// Lookup runs one pipeline over a batch's keys in stripe order, holding a
// stripe's read lock while its keys are in flight: batches shorter and
// longer than the pipeline, over 64 stripes, with keys present and absent
// and repeated, find exactly the model's rows with their dirty flags.
TEST_F(DramCacheTest, LookupBatchesOverManyStripesMatchModel) {
  DramCacheOptions o;
  o.dram_bytes_max = 4000 * kRowBytes;
  o.lock_stripes = 64;
  auto made = DramCache::Create(o, OneTable(), nullptr);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  DramCache& c = **made;
  std::mt19937_64 rng(23);
  std::map<Key, std::pair<uint64_t, bool>> model;  // key -> version, dirty
  std::vector<Key> all;
  for (uint64_t version = 1; version <= 3; ++version) {
    std::vector<Key> keys;
    std::vector<uint8_t> dirty;
    for (int i = 0; i < 1000; ++i) {
      // Rewrites of earlier keys too (the newest version wins).
      const Key k = !all.empty() && rng() % 5 == 0 ? all[rng() % all.size()] : Key{rng()};
      if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
      keys.push_back(k);
      dirty.push_back(rng() % 2);
      if (model.count(k) == 0) all.push_back(k);
      model[k] = {version, dirty.back() != 0};
    }
    ASSERT_TRUE(Put(c, keys, version, {}, dirty).ok());
  }
  ASSERT_EQ(c.Stats().rows, model.size());
  uint64_t hits = 0, misses = 0;
  for (size_t n : {1, 5, 16, 17, 33, 100, 4096}) {
    std::vector<Key> batch;
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(rng() % 4 == 0 ? Key{rng()} : all[rng() % all.size()]);
    }
    std::vector<std::byte> rows(n * kRowBytes);
    std::vector<uint8_t> found(n), dirty(n);
    ASSERT_TRUE(c.Lookup(kTable, batch, rows, found, dirty).ok());
    for (size_t i = 0; i < n; ++i) {
      auto it = model.find(batch[i]);
      ASSERT_EQ(found[i], it != model.end() ? 1 : 0) << "batch " << n << " key " << batch[i];
      if (it == model.end()) {
        ++misses;
        continue;
      }
      ++hits;
      EXPECT_EQ(dirty[i], it->second.second ? 1 : 0) << "batch " << n << " key " << batch[i];
      EXPECT_EQ(testing::RowVersion(batch[i], {rows.data() + i * kRowBytes, kRowBytes}),
                static_cast<int64_t>(it->second.first))
          << "batch " << n << " key " << batch[i];
    }
  }
  EXPECT_EQ(c.Stats().hits, hits);
  EXPECT_EQ(c.Stats().misses, misses);
}

// The inverse of DramKeyHash (the murmur3 finaliser is a bijection): keys
// with chosen hashes. The multipliers' inverses mod 2^64 by Newton's
// iteration (each step doubles the correct low bits).
uint64_t InverseMul(uint64_t a) {
  uint64_t x = a;  // correct to 3 bits for odd a
  for (int i = 0; i < 5; ++i) x *= 2 - a * x;
  return x;
}
Key KeyOfHash(uint64_t h) {
  h ^= h >> 33;
  h *= InverseMul(0xc4ceb9fe1a85ec53ull);
  h ^= h >> 33;
  h *= InverseMul(0xff51afd7ed558ccdull);
  h ^= h >> 33;
  return h;
}

// Keys whose hashes share the stripe bits and the tag (bits 31..2) share
// both candidate lines: a lookup's first tag match may be another key's
// entry (a false match), and past 16 such keys the rest live in the stash.
// Lookups in one batch with other keys find each of them with its own row
// and dirty flag, and miss absent keys of the same tag.
TEST_F(DramCacheTest, LookupsOfKeysSharingStripeAndTagFindTheirOwnRows) {
  for (uint32_t stripes : {1u, 8u}) {
    SCOPED_TRACE("stripes " + std::to_string(stripes));
    DramCacheOptions o;
    o.dram_bytes_max = 2000 * kRowBytes;
    o.lock_stripes = stripes;
    auto made = DramCache::Create(o, OneTable(), nullptr);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    DramCache& c = **made;
    // 24 keys of one stripe and tag (bits 63..58 and 31..2 equal), 8 absent
    // ones of the same, and 1,000 random keys around them.
    const uint64_t same = 0xA400'0000'8765'4320ull;
    std::vector<Key> shared, absent;
    for (uint64_t v = 1; v <= 32; ++v) {
      const Key k = KeyOfHash(same | (v << 32) | (v & 3));
      ASSERT_EQ(DramKeyHash(k) >> 58, same >> 58);
      ASSERT_EQ((DramKeyHash(k) >> 2) & 0x3fffffffu, (same >> 2) & 0x3fffffffu);
      (v <= 24 ? shared : absent).push_back(k);
    }
    std::mt19937_64 rng(stripes);
    std::vector<Key> keys = shared;
    for (int i = 0; i < 1000; ++i) keys.push_back(rng());
    std::vector<uint8_t> dirty(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) dirty[i] = (i % 3) == 0;
    ASSERT_TRUE(Put(c, keys, 7, {}, dirty).ok());
    // Every shared key, the absent ones, and random present keys, shuffled
    // into one batch, then each shared key alone.
    std::vector<Key> batch = shared;
    batch.insert(batch.end(), absent.begin(), absent.end());
    for (int i = 0; i < 200; ++i) batch.push_back(keys[rng() % keys.size()]);
    std::shuffle(batch.begin(), batch.end(), rng);
    std::vector<std::vector<Key>> batches = {batch};
    for (Key k : shared) batches.push_back({k});
    for (const auto& b : batches) {
      std::vector<std::byte> rows(b.size() * kRowBytes);
      std::vector<uint8_t> found(b.size()), got_dirty(b.size());
      ASSERT_TRUE(c.Lookup(kTable, b, rows, found, got_dirty).ok());
      for (size_t i = 0; i < b.size(); ++i) {
        const auto at = std::find(keys.begin(), keys.end(), b[i]);
        if (at == keys.end()) {
          EXPECT_EQ(found[i], 0) << "absent key " << b[i];
          continue;
        }
        ASSERT_EQ(found[i], 1) << "key " << b[i];
        EXPECT_EQ(got_dirty[i], dirty[at - keys.begin()]) << "key " << b[i];
        EXPECT_EQ(testing::RowVersion(b[i], {rows.data() + i * kRowBytes, kRowBytes}), 7)
            << "key " << b[i];
      }
    }
  }
}

TEST_F(DramCacheTest, DuplicateKeysInOneInsertLastWins) {
  auto c = MakeCache(16);
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
  auto c = MakeCache(4);
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
  auto c = MakeCache(4);
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

// Rows with no next use go before any with one (among them in no set order),
// then the farthest next use; clocks far beyond 2^18 still order by their
// leading 19 bits.
TEST_F(DramCacheTest, RowsWithoutNextUseGoFirstThenTheFarthest) {
  auto c = MakeCache(5);
  const Clock far = Clock{1} << 40;
  ASSERT_TRUE(
      Put(*c, {1, 2, 3, 4, 5}, 1, {100, kClockNever, kClockNever, far, far + (far >> 10)}).ok());
  std::vector<Key> order = EvictionOrder(*c, {11, 12, 13, 14, 15}, 1);
  ASSERT_EQ(order.size(), 5u);
  std::sort(order.begin(), order.begin() + 2);
  EXPECT_EQ(order, (std::vector<Key>{2, 3, 5, 4, 1}));
}

TEST_F(DramCacheTest, SetNextUseReordersEviction) {
  auto c = MakeCache(3);
  ASSERT_TRUE(Put(*c, {1, 2, 3}, 1, {10, 20, 30}).ok());
  std::vector<Key> keys = {1, 3, 99};
  std::vector<Clock> next = {40, kClockNever, 1};  // 99 is missing: ignored
  ASSERT_TRUE(c->SetNextUse(kTable, keys, next).ok());
  ASSERT_TRUE(Put(*c, {4}, 1, {1}).ok());  // 3 has no next use now
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2, 4}));
  ASSERT_TRUE(Put(*c, {5}, 1, {1}).ok());  // 1 (40) is farther than 2 (20)
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{2, 4, 5}));
}

TEST_F(DramCacheTest, LookupIsNotAUse) {
  auto c = MakeCache(3);
  ASSERT_TRUE(Put(*c, {1, 2, 3}, 1, {30, 20, 10}).ok());
  EXPECT_EQ(Get(*c, {1, 1, 1}), (std::vector<uint8_t>{1, 1, 1}));
  ASSERT_TRUE(Put(*c, {4}, 1, {1}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{2, 3, 4}));
}

// Values in [fallback_base, fallback_end) rank above every clock, the one
// nearest fallback_end (the smallest score) first.
TEST_F(DramCacheTest, FallbackValuesRankAboveClocksNearestTheEndFirst) {
  DramCacheOptions o;
  o.fallback_base = 1000;
  o.fallback_end = 2000;
  auto c = MakeCache(5, nullptr, OneTable(), o);
  ASSERT_TRUE(Put(*c, {1, 2, 3, 4, 5}, 1, {999, 1001, 1999, 1500, kClockNever}).ok());
  std::vector<Key> order = EvictionOrder(*c, {11, 12, 13, 14, 15}, 0);
  EXPECT_EQ(order, (std::vector<Key>{5, 3, 4, 2, 1}));
}

// Against a model: every Insert of a new key into the full cache evicts the
// row with the largest next use (all distinct and below 2^18, so exact),
// through sweeps (the cache is larger than the front), rows queued late
// (new rows, SetNextUse, overwrites above the front), and erases.
TEST_F(DramCacheTest, VictimIsAlwaysTheFarthestNextUseAgainstModel) {
  const uint64_t n = 3 * kDramFrontRowsMin;
  auto c = MakeCache(n);
  std::mt19937_64 rng(11);
  std::set<Clock> used;
  auto fresh_clock = [&] {
    while (true) {
      Clock x = static_cast<Clock>(rng() % (uint64_t{1} << 18));
      if (used.insert(x).second) return x;
    }
  };
  std::map<Clock, Key> by_clock;  // the model: next use -> key
  std::unordered_map<Key, Clock> clock_of;
  Key next_key = 0;
  auto put = [&](Key k, Clock x) {
    ASSERT_TRUE(Put(*c, {k}, 1, {x}).ok());
    if (auto it = clock_of.find(k); it != clock_of.end()) by_clock.erase(it->second);
    clock_of[k] = x;
    by_clock[x] = k;
  };
  for (uint64_t i = 0; i < n; ++i) put(next_key++, fresh_clock());
  for (int op = 0; op < 12000; ++op) {
    auto at = by_clock.lower_bound(static_cast<Clock>(rng() % (uint64_t{1} << 18)));
    const Key some = (at == by_clock.end() ? by_clock.begin() : at)->second;  // a resident key
    switch (rng() % 8) {
      case 0: {  // SetNextUse
        const Clock x = fresh_clock();
        ASSERT_TRUE(c->SetNextUse(kTable, std::vector<Key>{some}, std::vector<Clock>{x}).ok());
        by_clock.erase(clock_of[some]);
        clock_of[some] = x;
        by_clock[x] = some;
        break;
      }
      case 1:  // overwrite
        put(some, fresh_clock());
        break;
      case 2: {  // erase, then a new key fills the hole without evicting
        ASSERT_TRUE(c->Erase(kTable, std::vector<Key>{some}).ok());
        by_clock.erase(clock_of[some]);
        clock_of.erase(some);
        put(next_key++, fresh_clock());
        break;
      }
      default: {  // a new key evicts the farthest
        const Key victim = std::prev(by_clock.end())->second;
        by_clock.erase(std::prev(by_clock.end()));
        clock_of.erase(victim);
        put(next_key++, fresh_clock());
        ASSERT_EQ(Get(*c, {victim})[0], 0) << "op " << op << ": key " << victim << " not evicted";
        break;
      }
    }
    ASSERT_EQ(c->Stats().rows, n) << "op " << op;
  }
}

// Rows that come to outrank the front of the queue faster than it drains
// drop both queues (late_ outgrows the front); the next sweep must find them
// all again, and a row the sweep skipped (pinned) must be queued when it
// becomes a victim again, so the order stays exact through the drop.
TEST_F(DramCacheTest, QueuesDroppedByManyRisingRowsKeepTheExactOrder) {
  constexpr uint64_t kRows = 4096;  // a front of 1024 rows
  auto c = MakeCache(kRows);
  std::map<Clock, Key> model;  // next use -> key; the farthest leaves first
  std::vector<Key> keys;
  std::vector<Clock> next;
  for (Key k = 0; k < kRows; ++k) {
    keys.push_back(k);
    next.push_back(static_cast<Clock>(k));
    model[static_cast<Clock>(k)] = k;
  }
  ASSERT_TRUE(Put(*c, keys, 1, next).ok());
  Key fresh = 1'000'000;
  auto insert_fresh = [&](uint64_t n) {
    std::vector<Key> batch;
    for (uint64_t i = 0; i < n; ++i) {
      batch.push_back(fresh++);
      model.erase(std::prev(model.end()));
    }
    // Clock -1 ranks below every other row: none of the new rows leaves.
    ASSERT_TRUE(Put(*c, batch, 1, std::vector<Clock>(n, -1)).ok());
  };
  insert_fresh(1);  // a sweep: the front holds the 1024 farthest
  // 2000 of the nearest rows now rank above every queued one.
  std::vector<Key> rising;
  std::vector<Clock> rising_next;
  for (Key k = 0; k < 2000; ++k) {
    rising.push_back(k);
    rising_next.push_back(static_cast<Clock>(10'000 + k));
    model.erase(static_cast<Clock>(k));
    model[static_cast<Clock>(10'000 + k)] = k;
  }
  ASSERT_TRUE(c->SetNextUse(kTable, rising, rising_next).ok());
  // Key 1000 was queued before the drop; pinned through the next sweep, it
  // is in no queue when its move up ends, and must be queued then (it ranks
  // above the new front's smallest).
  DramCache::MoveUp move;
  ASSERT_TRUE(c->BeginMoveUp(kTable, std::vector<Key>{1000}, &move).ok());
  ASSERT_NO_FATAL_FAILURE(insert_fresh(1));
  ASSERT_TRUE(c->EndMoveUp(kTable, std::vector<Key>{1000}, &move, /*moved=*/false).ok());
  for (int b = 0; b < 30; ++b) {
    ASSERT_NO_FATAL_FAILURE(insert_fresh(100));
    std::vector<Key> expected;
    for (auto [clock, k] : model) expected.push_back(k);
    for (Key k = 1'000'000; k < fresh; ++k) expected.push_back(k);
    std::sort(expected.begin(), expected.end());
    ASSERT_EQ(ResidentKeys(*c, kTable), expected) << "after batch " << b;
  }
}

// A sweep counts long runs of rows with one metadata word a block at a
// time: 3,046 near rows (one run) then 1,050 far ones (another run, a
// coarse bin of its own) in a 4,096-row cache (a front of 1,024). The far
// bin holds more rows than the front, so the sweep's threshold is the far
// code and every far row leaves before any near one (fails when a block
// of a run is miscounted: the far bin then looks smaller than the front,
// the threshold falls into the near bin, and near rows of low slots fill
// the front).
TEST_F(DramCacheTest, SweepCountsLongRunsOfOneCodeExactly) {
  constexpr uint64_t kRows = 4096;
  constexpr Key kNear = 3046;
  auto c = MakeCache(kRows);
  std::vector<Key> near, far;
  for (Key k = 0; k < kRows; ++k) (k < kNear ? near : far).push_back(k);
  ASSERT_TRUE(Put(*c, near, 1, std::vector<Clock>(near.size(), 10)).ok());
  ASSERT_TRUE(Put(*c, far, 1, std::vector<Clock>(far.size(), Clock{1} << 20)).ok());
  std::vector<Key> expected = near;
  for (Key k = 1'000'000; k < 1'000'000 + far.size(); k += 50) {
    std::vector<Key> batch;
    for (Key i = k; i < k + 50; ++i) batch.push_back(i);
    ASSERT_TRUE(Put(*c, batch, 1, std::vector<Clock>(batch.size(), -1)).ok());
    expected.insert(expected.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(ResidentKeys(*c, kTable), expected);
}

// The same with codes mixed inside every block of 16 metadata words: one
// row in four is far, and the last 100 too (1,099 far rows, more than the
// front of 1,024), in one run of slots. The far bin still sets the
// threshold, so every far row leaves before any near one (fails when a
// block whose words merely include the run's word is counted as a run of
// it: the far bin then looks almost empty).
TEST_F(DramCacheTest, SweepCountsBlocksOfMixedCodesExactly) {
  constexpr uint64_t kRows = 4096;
  auto c = MakeCache(kRows);
  std::vector<Key> keys, near;
  std::vector<Clock> next;
  uint64_t far_rows = 0;
  for (Key k = 0; k < kRows; ++k) {
    const bool far = k % 4 == 3 || k >= kRows - 100;
    keys.push_back(k);
    next.push_back(far ? Clock{1} << 20 : 10);
    if (far) {
      ++far_rows;
    } else {
      near.push_back(k);
    }
  }
  ASSERT_GT(far_rows, kDramFrontRowsMin);
  ASSERT_TRUE(Put(*c, keys, 1, next).ok());
  std::vector<Key> expected = near;
  for (Key k = 1'000'000; k < 1'000'000 + far_rows;) {
    std::vector<Key> batch;
    for (; batch.size() < 50 && k < 1'000'000 + far_rows; ++k) batch.push_back(k);
    ASSERT_TRUE(Put(*c, batch, 1, std::vector<Clock>(batch.size(), -1)).ok());
    expected.insert(expected.end(), batch.begin(), batch.end());
  }
  EXPECT_EQ(ResidentKeys(*c, kTable), expected);
}

TEST_F(DramCacheTest, RowsMovingUpAreNeverEvicted) {
  auto c = MakeCache(4);
  ASSERT_TRUE(Put(*c, {1, 2, 3, 4}, 1, {kClockNever, 9, 9, 9}).ok());
  std::vector<Key> moving = {1, 2, 77};
  DramCache::MoveUp move;
  ASSERT_TRUE(c->BeginMoveUp(kTable, moving, &move).ok());
  EXPECT_EQ(move.pinned, (std::vector<uint8_t>{1, 1, 0}));
  for (Key k = 100; k < 150; ++k) ASSERT_TRUE(Put(*c, {k}, 1, {kClockNever}).ok());
  auto resident = ResidentKeys(*c, kTable);
  EXPECT_TRUE(std::binary_search(resident.begin(), resident.end(), 1));
  EXPECT_TRUE(std::binary_search(resident.begin(), resident.end(), 2));
  EXPECT_EQ(resident.size(), 4u);
  ASSERT_TRUE(c->EndMoveUp(kTable, moving, &move, /*moved=*/false).ok());
  ASSERT_TRUE(Put(*c, {200, 201, 202, 203}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{200, 201, 202, 203}));
}

TEST_F(DramCacheTest, EraseOfARowMovingUpAndEndMoveUpMisuseFailWithoutChanges) {
  auto c = MakeCache(4);
  ASSERT_TRUE(Put(*c, {1, 2}).ok());
  DramCache::MoveUp move;
  ASSERT_TRUE(c->BeginMoveUp(kTable, std::vector<Key>{1}, &move).ok());
  Status s = c->Erase(kTable, std::vector<Key>{2, 1});
  EXPECT_TRUE(s.IsFailedPrecondition()) << s.ToString();
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2}));
  s = c->EndMoveUp(kTable, std::vector<Key>{1, 2}, &move, true);  // not BeginMoveUp's keys
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2}));
  ASSERT_TRUE(c->EndMoveUp(kTable, std::vector<Key>{1}, &move, /*moved=*/false).ok());
  ASSERT_TRUE(c->Erase(kTable, std::vector<Key>{2, 1, 55}).ok());
  EXPECT_TRUE(ResidentKeys(*c, kTable).empty());
  EXPECT_EQ(c->Stats().bytes_used, 0u);
}

class DramMoveUpTest : public DramCacheTest {
 protected:
  // A cache of four rows (keys 1-4, next uses 10-40) with `transit_rows`
  // rows allowed in a move up.
  static std::unique_ptr<DramCache> FourRowsWithTransit(uint64_t transit_rows) {
    DramCacheOptions o;
    o.transit_rows_max = transit_rows;
    auto c = MakeCache(4, nullptr, OneTable(), o);
    EXPECT_TRUE(Put(*c, {1, 2, 3, 4}, 1, {10, 20, 30, 40}).ok());
    return c;
  }
};

// A move up: the rows leaving stay readable and are no victims, and the rows
// inserted meanwhile take their room instead of evicting others.
TEST_F(DramMoveUpTest, MoveUpLetsInsertsTakeTheLeavingRowsRoom) {
  auto c = FourRowsWithTransit(4);
  std::vector<Key> up = {1, 2, 99};  // 99 is not resident
  DramCache::MoveUp move;
  ASSERT_TRUE(c->BeginMoveUp(kTable, up, &move).ok());
  EXPECT_EQ(move.pinned, (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_EQ(move.bytes, 2u * kRowBytes);
  // Two rows come down: they fit beside the leaving ones, nothing evicted.
  ASSERT_TRUE(Put(*c, {5, 6}, 1, {50, 60}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(c->Stats().evictions, 0u);
  // A third needs room: the farthest next use goes, never a leaving row.
  ASSERT_TRUE(Put(*c, {7}, 1, {5}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2, 3, 4, 5, 7}));
  EXPECT_EQ(Get(*c, {1, 2}), (std::vector<uint8_t>{1, 1}));
  ASSERT_TRUE(c->EndMoveUp(kTable, up, &move, /*moved=*/true).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{3, 4, 5, 7}));
  EXPECT_EQ(c->Stats().bytes_used, 4u * kRowBytes);
  EXPECT_EQ(c->Stats().evictions, 1u);
}

// A move up that did not happen leaves the rows, unpinned; the cache is over
// its budget until the next Insert evicts down to it.
TEST_F(DramMoveUpTest, MoveUpNotDoneKeepsRowsAndEvictsBackToBudget) {
  auto c = FourRowsWithTransit(4);
  std::vector<Key> up = {3, 4};
  DramCache::MoveUp move;
  ASSERT_TRUE(c->BeginMoveUp(kTable, up, &move).ok());
  ASSERT_TRUE(Put(*c, {5, 6}, 1, {1, 2}).ok());
  ASSERT_TRUE(c->EndMoveUp(kTable, up, &move, /*moved=*/false).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2, 3, 4, 5, 6}));
  // Unpinned, 3 and 4 are victims again: the next Insert evicts the three
  // farthest next uses (4, 3, 2) to be back at four rows.
  ASSERT_TRUE(Put(*c, {7}, 1, {3}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 5, 6, 7}));
  EXPECT_EQ(c->Stats().bytes_used, 4u * kRowBytes);
}

// Leaving bytes beyond transit_rows_max are not counted: the arena's spare
// slots bound what a move up may hold beyond the budget. Without transit
// rows a move up only pins.
TEST_F(DramMoveUpTest, MoveUpCountsAtMostTheTransitRows) {
  auto c = FourRowsWithTransit(1);
  std::vector<Key> up = {1, 2};
  DramCache::MoveUp move;
  ASSERT_TRUE(c->BeginMoveUp(kTable, up, &move).ok());
  EXPECT_EQ(move.bytes, uint64_t{kRowBytes});
  ASSERT_TRUE(Put(*c, {5, 6}, 1, {50, 60}).ok());
  EXPECT_EQ(c->Stats().bytes_used, 5u * kRowBytes);
  EXPECT_TRUE(c->EndMoveUp(kTable, std::vector<Key>{1}, &move, true).IsInvalidArgument());
  ASSERT_TRUE(c->EndMoveUp(kTable, up, &move, true).ok());
  EXPECT_EQ(c->Stats().bytes_used, 3u * kRowBytes);

  auto plain = MakeCache(2);
  ASSERT_TRUE(Put(*plain, {1, 2}, 1, {10, 20}).ok());
  DramCache::MoveUp pin_only;
  ASSERT_TRUE(plain->BeginMoveUp(kTable, std::vector<Key>{1}, &pin_only).ok());
  EXPECT_EQ(pin_only.bytes, 0u);
  ASSERT_TRUE(Put(*plain, {3}, 1, {30}).ok());  // evicts 2, not the pinned 1
  EXPECT_EQ(ResidentKeys(*plain, kTable), (std::vector<Key>{1, 3}));
  ASSERT_TRUE(plain->EndMoveUp(kTable, std::vector<Key>{1}, &pin_only, true).ok());
  EXPECT_EQ(ResidentKeys(*plain, kTable), (std::vector<Key>{3}));
}

TEST_F(DramCacheTest, ForEachReportsDirtyFlagsAndStopsOnError) {
  auto c = MakeCache(8);
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
  const uint64_t n = 1 << 16;
  auto c = MakeCache(n);
  std::vector<Key> keys(n);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 0x9e3779b97f4a7c15ull;
  ASSERT_TRUE(Put(*c, keys).ok());
  DramCacheStats s = c->Stats();
  double per_row = double(s.index_bytes) / double(s.rows);
  EXPECT_GT(per_row, 12.0 + 8.0);  // slot key and metadata word, index at load <= 7/8
  EXPECT_LE(per_row, 24.0);
  // After a full turn of evictions (sweeps, queues) too.
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = (n + i) * 0x9e3779b97f4a7c15ull;
  ASSERT_TRUE(Put(*c, keys).ok());
  s = c->Stats();
  EXPECT_EQ(s.evictions, n);
  per_row = double(s.index_bytes) / double(s.rows);
  EXPECT_LE(per_row, 24.0);
}

}  // namespace
}  // namespace strata::storage
