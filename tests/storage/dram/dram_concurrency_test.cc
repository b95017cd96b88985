// strata-test-labels: unit
// Concurrent lookups, inserts, evictions with write-back, pins and flushes on
// a small cache over a store that fails now and then. Built for TSan and ASan
// too (build-tsan, build-asan). Threads start together on a latch; no sleeps.
#include <gtest/gtest.h>

#include <latch>
#include <random>
#include <thread>
#include <unordered_map>

#include "storage/dram/dram_cache.h"
#include "tests/storage/dram/dram_test_util.h"
#include "tests/storage/ssd/memory_row_store.h"

namespace strata::storage {
namespace {

using testing::MakeRow;
using testing::MemoryRowStore;

constexpr TableId kTable = 4;
constexpr uint32_t kRowBytes = 64;
constexpr uint64_t kKeySpace = 1024;
constexpr int kWriters = 2;
constexpr int kReaders = 2;
constexpr int kBatches = 3000;

Key KeyOf(uint64_t i) { return i * 0x9e3779b97f4a7c15ull; }  // KeyOf(0) == 0

class DramConcurrencyTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(DramConcurrencyTest, LookupsInsertsEvictionsAndMovesUpInParallel) {
  const std::vector<TableSpec> tables = {{kTable, "emb", kRowBytes}};
  MemoryRowStore store(tables);
  DramCacheOptions o;
  o.dram_bytes_max = 128 * kRowBytes;
  o.lock_stripes = GetParam();
  auto made = DramCache::Create(o, tables, &store);
  ASSERT_TRUE(made.ok());
  DramCache& cache = **made;

  std::latch start(kWriters + kReaders + 1);
  // Writer w owns keys i with i % kWriters == w, so its versions per key rise.
  std::vector<std::unordered_map<Key, uint64_t>> last(kWriters);
  // Version 0 of a full cache's worth of rows, so readers find rows however
  // the threads are scheduled.
  {
    std::vector<Key> keys;
    for (uint64_t i = 0; i < 128; ++i) {
      keys.push_back(KeyOf(i * 7 % kKeySpace));
      last[(i * 7 % kKeySpace) % kWriters][keys.back()] = 0;
    }
    auto rows = testing::MakeRows(keys, 0, kRowBytes);
    ASSERT_TRUE(cache.Insert(kTable, keys, rows, std::vector<uint8_t>(keys.size(), 1), {}).ok());
  }
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      start.arrive_and_wait();
      for (uint64_t version = 1; version <= kBatches; ++version) {
        std::vector<Key> keys(16);
        for (Key& k : keys) k = KeyOf((rng() % (kKeySpace / kWriters)) * kWriters + w);
        auto rows = testing::MakeRows(keys, version, kRowBytes);
        std::vector<uint8_t> dirty(keys.size(), 1);
        std::vector<Clock> next(keys.size());
        for (Clock& c : next) c = rng() % 4 ? static_cast<Clock>(rng() % 1000) : kClockNever;
        Status s = cache.Insert(kTable, keys, rows, dirty, next);
        if (s.ok()) {
          for (Key k : keys) last[w][k] = version;
        } else {
          EXPECT_TRUE(s.IsIOError() || s.IsResourceExhausted()) << s.ToString();
        }
      }
    });
  }
  std::atomic<uint64_t> rows_seen{0};
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937_64 rng(100 + r);
      start.arrive_and_wait();
      std::vector<Key> keys(64);
      std::vector<std::byte> out(keys.size() * kRowBytes);
      std::vector<uint8_t> found(keys.size()), dirty(keys.size());
      for (int b = 0; b < kBatches; ++b) {
        for (Key& k : keys) k = KeyOf(rng() % kKeySpace);
        ASSERT_TRUE(cache.Lookup(kTable, keys, out, found, dirty).ok());
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!found[i]) continue;
          ASSERT_GE(testing::RowVersion(keys[i], {out.data() + i * kRowBytes, kRowBytes}), 0)
              << "torn or misplaced row of key " << keys[i];
          rows_seen.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  // This thread: moves up, next uses, flushes, stats, store faults.
  {
    std::mt19937_64 rng(7);
    start.arrive_and_wait();
    for (int b = 0; b < kBatches; ++b) {
      std::vector<Key> keys = {KeyOf(rng() % kKeySpace), KeyOf(rng() % kKeySpace)};
      // Moves up that do not happen: the rows stay pinned, then unpinned.
      DramCache::MoveUp move;
      ASSERT_TRUE(cache.BeginMoveUp(kTable, keys, &move).ok());
      std::vector<Clock> next = {static_cast<Clock>(rng() % 1000), kClockNever};
      ASSERT_TRUE(cache.SetNextUse(kTable, keys, next).ok());
      ASSERT_TRUE(cache.EndMoveUp(kTable, keys, &move, /*moved=*/false).ok());
      if (b % 50 == 0) store.FailNextPuts(1 + rng() % 3);
      if (b % 64 == 0) {
        Status s = cache.FlushDirty();
        EXPECT_TRUE(s.ok() || s.IsIOError()) << s.ToString();
      }
      DramCacheStats st = cache.Stats();
      EXPECT_LE(st.bytes_used, o.dram_bytes_max);
    }
  }
  for (auto& t : threads) t.join();

  store.FailNextPuts(0);
  ASSERT_TRUE(cache.FlushDirty().ok());
  std::unordered_map<Key, int64_t> cached;
  ASSERT_TRUE(cache
                  .ForEach(kTable,
                           [&](Key k, std::span<const std::byte> row, bool dirty) {
                             EXPECT_FALSE(dirty);
                             cached[k] = testing::RowVersion(k, row);
                             return Status::Ok();
                           })
                  .ok());
  auto stored = store.Rows(kTable);
  for (int w = 0; w < kWriters; ++w) {
    for (auto [k, version] : last[w]) {
      // After the flush the store holds the newest copy of every row.
      ASSERT_TRUE(stored.count(k)) << "key " << k;
      EXPECT_EQ(testing::RowVersion(k, stored[k]), static_cast<int64_t>(version)) << "key " << k;
      if (cached.count(k)) {
        EXPECT_EQ(cached[k], static_cast<int64_t>(version)) << "key " << k;
      }
    }
  }
  DramCacheStats st = cache.Stats();
  EXPECT_GT(st.evictions, 0u);
  EXPECT_GT(st.dirty_writebacks, 0u);
}

INSTANTIATE_TEST_SUITE_P(Stripes, DramConcurrencyTest, ::testing::Values(1u, 8u));

}  // namespace
}  // namespace strata::storage
