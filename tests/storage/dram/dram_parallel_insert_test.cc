// strata-test-labels: unit
// Inserts in parallel: an Insert writes its victims back, erases them and
// places its rows outside the mutation lock, so other Inserts and lookups go
// on meanwhile; a key another Insert is placing, and a row another Insert
// holds (its victim), are waited for. Deterministic cases hold a write-back
// in flight with a gated store; the stress case runs two inserting threads
// (keys of their own and keys they share) and a reader against a model. Built
// for TSan and ASan too. No sleeps: threads meet on latches and counters.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <latch>
#include <map>
#include <random>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "storage/dram/dram_cache.h"
#include "tests/storage/dram/dram_test_util.h"
#include "tests/storage/dram/gated_row_store.h"
#include "tests/storage/ssd/memory_row_store.h"

namespace strata::storage {
namespace {

using testing::GatedRowStore;
using testing::MakeRow;
using testing::MemoryRowStore;
using testing::RowVersion;

// The version of `key` the cache holds (-1: absent).
int64_t CachedVersion(DramCache& c, Key key, uint32_t row_bytes, TableId table) {
  std::vector<std::byte> row(row_bytes);
  std::vector<uint8_t> found(1);
  EXPECT_TRUE(c.Lookup(table, {&key, 1}, row, found, {}).ok());
  return found[0] ? RowVersion(key, row) : -1;
}

// How many resident rows hold `key` (ForEach walks slots, so a key placed
// twice shows twice).
int Copies(DramCache& c, Key key, TableId table) {
  int n = 0;
  EXPECT_TRUE(c.ForEach(table, [&](Key k, std::span<const std::byte>, bool) {
                 n += k == key;
                 return Status::Ok();
               }).ok());
  return n;
}

// A cache of two rows, key 1 (dirty, next use 90: the first victim) and key
// 2 (clean, next use 10), and an Insert of key 3 (next use 50, version 6)
// on its own thread, held while it writes key 1 back.
class DramParallelInsertTest : public testing::DramCacheFixture {
 protected:
  void SetUp() override {
    cache_ = MakeCache(2, &store_);
    ASSERT_TRUE(Put(*cache_, {1, 2}, 1, {90, 10}, {1, 0}).ok());
    store_.Arm();
    writer_ = std::thread([this] { first_ = Put(*cache_, {3}, 6, {50}); });
    store_.WaitUntilPutStarted();
  }
  void TearDown() override {
    if (writer_.joinable()) writer_.join();
  }

  // Runs `op` on another thread and checks that it waits for the held
  // Insert (Stats().insert_waits) and does not return before the write-back
  // is let go; then lets it go and joins both. Returns whether the write-back
  // had finished when `op` returned.
  bool RunWaitingForTheHeldInsert(const std::function<void()>& op) {
    std::atomic<bool> returned{false};
    bool write_done_first = false;
    std::thread other([&] {
      op();
      write_done_first = store_.put_finished();
      returned = true;
    });
    while (cache_->Stats().insert_waits == 0 && !returned) std::this_thread::yield();
    EXPECT_FALSE(returned) << "returned without waiting for the held Insert";
    store_.Release();
    writer_.join();
    other.join();
    EXPECT_TRUE(first_.ok()) << first_.ToString();
    return write_done_first;
  }

  GatedRowStore store_{OneTable()};
  std::unique_ptr<DramCache> cache_;
  Status first_;
  std::thread writer_;
};

// While one Insert writes its dirty victim back (the store holds the write),
// the victim stays readable, another Insert that needs no I/O completes, and
// an Erase of the victim waits for the write-back to end.
TEST_F(DramParallelInsertTest, WriteBackOfOneInsertBlocksNeitherLookupsNorOtherInserts) {
  DramCache& c = *cache_;
  EXPECT_EQ(CachedVersion(c, 1, kRowBytes, kTable), 1);
  // Evicts key 2 (clean: no I/O) and returns while the write-back waits.
  ASSERT_TRUE(Put(c, {4}, 7, {60}).ok());
  EXPECT_FALSE(store_.put_finished());
  EXPECT_EQ(CachedVersion(c, 4, kRowBytes, kTable), 7);
  EXPECT_EQ(CachedVersion(c, 2, kRowBytes, kTable), -1);
  EXPECT_TRUE(
      RunWaitingForTheHeldInsert([&] { EXPECT_TRUE(c.Erase(kTable, std::vector<Key>{1}).ok()); }));
  EXPECT_EQ(ResidentKeys(c, kTable), (std::vector<Key>{3, 4}));
  EXPECT_EQ(store_.Rows(kTable).at(1), MakeRow(1, 1, kRowBytes));
  EXPECT_EQ(c.Stats().evictions, 2u);
}

// Two Inserts of one absent key: the second waits for the first to place it,
// then overwrites it: one copy, the second's bytes.
TEST_F(DramParallelInsertTest, InsertOfAKeyAnotherInsertIsPlacingWaitsAndLandsLast) {
  DramCache& c = *cache_;
  EXPECT_TRUE(RunWaitingForTheHeldInsert([&] { EXPECT_TRUE(Put(c, {3}, 8, {50}).ok()); }));
  EXPECT_EQ(CachedVersion(c, 3, kRowBytes, kTable), 8);
  EXPECT_EQ(Copies(c, 3, kTable), 1);
  EXPECT_EQ(ResidentKeys(c, kTable), (std::vector<Key>{2, 3}));
  EXPECT_EQ(c.Stats().evictions, 1u);
}

// An overwrite of a row that another Insert is evicting (writing it back)
// waits until it has left, then places the row anew: the new bytes are not
// lost to the eviction, and the store got the old ones.
TEST_F(DramParallelInsertTest, OverwriteOfAVictimBeingWrittenBackWaitsThenPlacesItAgain) {
  DramCache& c = *cache_;
  EXPECT_TRUE(RunWaitingForTheHeldInsert([&] { EXPECT_TRUE(Put(c, {1}, 9, {20}, {1}).ok()); }));
  EXPECT_EQ(CachedVersion(c, 1, kRowBytes, kTable), 9);
  EXPECT_EQ(DirtyFlags(c, {1}), (std::vector<uint8_t>{1}));
  EXPECT_EQ(Copies(c, 1, kTable), 1);
  EXPECT_EQ(store_.Rows(kTable).at(1), MakeRow(1, 1, kRowBytes));
  // Key 3 (next use 50) was the farthest when key 1 came back.
  EXPECT_EQ(ResidentKeys(c, kTable), (std::vector<Key>{1, 2}));
}

// Two threads insert batches (dirty rows, random next uses) into a cache a
// third of their keys' size, each into keys of its own and into keys both
// share, while a reader looks rows up and the main thread flushes, walks the
// rows and makes the store fail now and then. Checked: no row is ever torn
// or misplaced; a thread's own keys are read at rising versions; no key is
// ever resident twice; afterwards the store holds, for each own key, the
// newest version, and for each shared key the newest of one of the threads.
// Parameters: lock stripes, shards. With several shards an Insert that fails
// in one shard keeps the rows the shards before it took: the writers insert
// with InsertInPieces, whose placed flags say which.
class DramParallelInsertStressTest
    : public ::testing::TestWithParam<std::tuple<uint32_t, uint32_t>> {};

TEST_P(DramParallelInsertStressTest, TwoInsertersAndAReaderMatchTheModel) {
  constexpr TableId kTable = 3;
  constexpr uint32_t kRowBytes = 64;
  constexpr uint64_t kOwn = 300;     // keys per writer
  constexpr uint64_t kShared = 100;  // keys both write
  constexpr uint64_t kRows = 256;    // cache rows
  constexpr uint64_t kBatches = 1500;
  constexpr uint64_t kBatch = 24;
  const std::vector<TableSpec> tables = {{kTable, "emb", kRowBytes}};
  MemoryRowStore store(tables);
  DramCacheOptions o;
  o.dram_bytes_max = kRows * kRowBytes;
  o.lock_stripes = std::get<0>(GetParam());
  o.shards = std::get<1>(GetParam());
  auto made = DramCache::Create(o, tables, &store);
  ASSERT_TRUE(made.ok());
  DramCache& cache = **made;
  // Own keys of writer w: 1 + w + 2 i; shared keys: 10,000 + i.
  auto own_key = [](int w, uint64_t i) { return Key{1 + w + 2 * i}; };
  auto shared_key = [](uint64_t i) { return Key{10000 + i}; };
  // Versions: writer w writes 2 * batch + w, so the two never collide.
  std::vector<std::unordered_map<Key, uint64_t>> last(2);
  std::atomic<bool> stop{false};
  std::latch start(4);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(11 + w);
      start.arrive_and_wait();
      for (uint64_t b = 1; b <= kBatches; ++b) {
        const uint64_t version = 2 * b + w;
        std::vector<Key> keys;
        while (keys.size() < kBatch) {
          keys.push_back(rng() % 4 == 0 ? shared_key(rng() % kShared) : own_key(w, rng() % kOwn));
        }
        auto rows = testing::MakeRows(keys, version, kRowBytes);
        std::vector<uint8_t> dirty(keys.size(), 1);
        std::vector<Clock> next(keys.size());
        for (Clock& n : next) n = rng() % 3 ? static_cast<Clock>(rng() % 5000) : kClockNever;
        std::vector<uint8_t> placed(keys.size());
        Status s = cache.InsertInPieces(kTable, keys, rows, dirty, next, placed);
        for (size_t i = 0; i < keys.size(); ++i) {
          if (placed[i] != 0) last[w][keys[i]] = version;
        }
        if (!s.ok()) EXPECT_TRUE(s.IsIOError()) << s.ToString();
      }
    });
  }
  threads.emplace_back([&] {
    std::mt19937_64 rng(5);
    // Highest version seen per own key: a later read never goes below it.
    std::unordered_map<Key, int64_t> seen;
    std::vector<Key> keys(64);
    std::vector<std::byte> out(keys.size() * kRowBytes);
    std::vector<uint8_t> found(keys.size());
    start.arrive_and_wait();
    while (!stop.load(std::memory_order_relaxed)) {
      for (Key& k : keys) {
        k = rng() % 4 == 0 ? shared_key(rng() % kShared) : own_key(rng() % 2, rng() % kOwn);
      }
      ASSERT_TRUE(cache.Lookup(kTable, keys, out, found, {}).ok());
      for (size_t i = 0; i < keys.size(); ++i) {
        if (!found[i]) continue;
        const int64_t v = RowVersion(keys[i], {out.data() + i * kRowBytes, kRowBytes});
        ASSERT_GE(v, 0) << "torn or misplaced row of key " << keys[i];
        if (keys[i] >= shared_key(0)) continue;
        int64_t& before = seen[keys[i]];
        ASSERT_GE(v, before) << "key " << keys[i] << " went back to an older version";
        before = v;
      }
    }
  });
  {
    std::mt19937_64 rng(9);
    start.arrive_and_wait();
    for (int round = 0; round < 60; ++round) {
      if (round % 4 == 0) store.FailNextPuts(1);
      Status s = cache.FlushDirty();
      EXPECT_TRUE(s.ok() || s.IsIOError()) << s.ToString();
      std::map<Key, int> copies;
      ASSERT_TRUE(cache
                      .ForEach(kTable,
                               [&](Key k, std::span<const std::byte> row, bool) {
                                 EXPECT_GE(RowVersion(k, row), 0) << "key " << k;
                                 ++copies[k];
                                 return Status::Ok();
                               })
                      .ok());
      for (auto [k, n] : copies) ASSERT_EQ(n, 1) << "key " << k << " resident twice";
      EXPECT_LE(cache.Stats().bytes_used, o.dram_bytes_max);
      std::this_thread::yield();
    }
  }
  threads[0].join();
  threads[1].join();
  stop = true;
  threads[2].join();

  store.FailNextPuts(0);
  ASSERT_TRUE(cache.FlushDirty().ok());
  auto stored = store.Rows(kTable);
  std::unordered_map<Key, int> copies;
  ASSERT_TRUE(cache
                  .ForEach(kTable,
                           [&](Key k, std::span<const std::byte> row, bool dirty) {
                             EXPECT_FALSE(dirty);
                             ++copies[k];
                             // Flushed: the store holds what the cache does.
                             EXPECT_TRUE(stored.count(k) &&
                                         stored[k] ==
                                             std::vector<std::byte>(row.begin(), row.end()))
                                 << "key " << k;
                             return Status::Ok();
                           })
                  .ok());
  for (auto [k, n] : copies) EXPECT_EQ(n, 1) << "key " << k;
  for (int w = 0; w < 2; ++w) {
    for (auto [k, version] : last[w]) {
      ASSERT_TRUE(stored.count(k)) << "key " << k;
      const int64_t v = RowVersion(k, stored[k]);
      if (k >= shared_key(0)) {
        // One of the two writers' newest: whichever Insert of it came last.
        const int64_t a = last[0].count(k) ? static_cast<int64_t>(last[0][k]) : -1;
        const int64_t b = last[1].count(k) ? static_cast<int64_t>(last[1][k]) : -1;
        EXPECT_TRUE(v == a || v == b)
            << "key " << k << " holds " << v << ", not " << a << " or " << b;
      } else {
        EXPECT_EQ(v, static_cast<int64_t>(version)) << "key " << k;
      }
    }
  }
  const DramCacheStats st = cache.Stats();
  EXPECT_GT(st.evictions, 0u);
  EXPECT_GT(st.dirty_writebacks, 0u);
  EXPECT_EQ(st.rows, copies.size());
}

INSTANTIATE_TEST_SUITE_P(StripesShards, DramParallelInsertStressTest,
                         ::testing::Values(std::make_tuple(1u, 1u), std::make_tuple(8u, 1u),
                                           std::make_tuple(8u, 4u)));

}  // namespace
}  // namespace strata::storage
