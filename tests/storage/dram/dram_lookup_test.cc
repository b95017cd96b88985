// strata-test-labels: unit
// DramLookup, the optimistic pipeline behind DramCache::Lookup: the keys it
// must hand to the locked path (stashed keys, false tag matches, absent keys
// whose home has a stash) come out right and counted, and lookups running
// while the index grows under them find every row published before they
// began. Built for TSan and ASan too; threads start on a latch, no sleeps.
#include "storage/dram/dram_lookup.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <latch>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "storage/dram/dram_cache.h"
#include "storage/dram/dram_index.h"
#include "storage/dram/dram_shard_internal.h"
#include "tests/storage/dram/dram_test_util.h"

namespace strata::storage {
namespace {

using testing::MakeRow;
using testing::RowVersion;

constexpr uint32_t kRowBytes = 16;
constexpr uint32_t kSlotBytes = kDramSlotHeaderBytes + kRowBytes;

// One stripe's index over slots in a plain buffer: a shard's view of one
// table, built by hand so a test chooses where each entry lands.
class HandMadeTable {
 public:
  explicit HandMadeTable(uint64_t slots) : words_(slots * kSlotBytes / 8), index_(1, false) {}

  // Makes room for `entries` entries; the buckets of the stripe after it.
  uint64_t Reserve(uint64_t entries) {
    index_.Reserve(0, entries);
    const DramIndex::Stripe& s = index_.stripe(0);
    base::ReaderLock lock(&s.mu);
    return s.map.buckets_count() / DramHashMap::kBucketEntries;
  }
  // Puts MakeRow(key, slot) in `slot` and its entry in the index.
  void Put(Key key, uint32_t slot, bool dirty) {
    WriteRow(key, slot, slot);
    DramIndex::Stripe& s = index_.stripe(0);
    base::WriterLock lock(&s.mu);
    s.map.Insert(DramKeyHash(key), slot, dirty);
  }
  // Writes the key and MakeRow(key, version) into `slot`, 8 bytes at a time,
  // as an Insert that overwrites the row does (with the stripe held).
  void WriteRow(Key key, uint32_t slot, uint64_t version) {
    std::byte* at = bytes() + uint64_t{slot} * kSlotBytes;
    std::memcpy(at, &key, sizeof(key));
    const auto row = MakeRow(key, version, kRowBytes);
    for (uint32_t off = 0; off < kRowBytes; off += 8) {
      std::memcpy(at + kDramSlotHeaderBytes + off, row.data() + off, 8);
    }
  }
  DramIndex::Stripe& stripe() { return index_.stripe(0); }
  uint64_t stash_size() const {
    const DramIndex::Stripe& s = index_.stripe(0);
    base::ReaderLock lock(&s.mu);
    return s.map.stash_size();
  }
  DramShard::LookupView View() const {
    return {&index_, bytes(), kSlotBytes, words_.size() * 8 / kSlotBytes, kRowBytes};
  }

 private:
  std::byte* bytes() const { return reinterpret_cast<std::byte*>(words_.data()); }
  mutable std::vector<uint64_t> words_;  // 8-byte aligned slots
  DramIndex index_;
};

struct Looked {
  std::vector<std::byte> rows;
  std::vector<uint8_t> found, dirty;
  DramLookupCounts counts;
  uint64_t hits = 0;
};

Looked Lookup(const HandMadeTable& t, const std::vector<Key>& keys) {
  Looked l;
  l.rows.resize(keys.size() * kRowBytes);
  l.found.resize(keys.size());
  l.dirty.resize(keys.size());
  const DramShard::LookupView view = t.View();
  l.hits = DramLookup({&view, 1}, keys, l.rows, l.found, l.dirty, {&l.counts, 1});
  return l;
}

TEST(DramLookupTest, StashedKeysAndAbsentKeysOfAStashedHomeGoThroughTheLock) {
  HandMadeTable table(64);
  const uint64_t lines = table.Reserve(200);
  ASSERT_GT(lines, 1u);
  // Keys whose two candidate buckets are the same pair: 16 fill both, the
  // rest can only be stashed.
  std::vector<Key> same_pair;
  uint64_t home = 0, alt = 0;
  for (Key k = 1; same_pair.size() < 24; ++k) {
    const uint32_t tag = DramHashMap::TagOf(DramKeyHash(k));
    const uint64_t h = DramHashMap::HomeIn(tag, lines), a = DramHashMap::AltIn(h, tag, lines);
    if (same_pair.empty()) {
      home = h;
      alt = a;
    }
    if (h == home && a == alt) same_pair.push_back(k);
  }
  const std::vector<Key> in(same_pair.begin(), same_pair.begin() + 20);
  const std::vector<Key> absent(same_pair.begin() + 20, same_pair.end());
  for (uint32_t i = 0; i < in.size(); ++i) table.Put(in[i], i, i % 2 == 1);
  const uint64_t stashed = table.stash_size();
  ASSERT_EQ(stashed, 4u) << "16 entries fill the pair's two buckets";

  std::vector<Key> keys = in;
  keys.insert(keys.end(), absent.begin(), absent.end());
  const Looked l = Lookup(table, keys);
  EXPECT_EQ(l.hits, in.size());
  EXPECT_EQ(l.counts.hits, in.size());
  EXPECT_EQ(l.counts.misses, absent.size());
  // The stashed keys match no entry of their buckets, and neither do the
  // absent ones: all of them are searched under the lock, nothing else is.
  EXPECT_EQ(l.counts.retries, stashed + absent.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const bool present = i < in.size();
    ASSERT_EQ(l.found[i], present ? 1 : 0) << "key " << keys[i];
    if (!present) {
      EXPECT_EQ(l.dirty[i], 0);
      continue;
    }
    EXPECT_EQ(RowVersion(keys[i], {l.rows.data() + i * kRowBytes, kRowBytes}),
              static_cast<int64_t>(i));
    EXPECT_EQ(l.dirty[i], i % 2 == 1 ? 1 : 0) << "key " << keys[i];
  }
}

TEST(DramLookupTest, AFalseTagMatchIsResolvedUnderTheLock) {
  // Two keys whose hashes share the 30-bit tag: their entries look alike.
  std::unordered_map<uint32_t, Key> by_tag;
  Key first = 0, second = 0;
  for (Key k = 1; second == 0; ++k) {
    auto [it, added] = by_tag.emplace(DramHashMap::TagOf(DramKeyHash(k)), k);
    if (!added) {
      first = it->second;
      second = k;
    }
  }
  HandMadeTable table(4);
  table.Put(first, 0, false);
  table.Put(second, 1, true);  // after `first` in the same bucket
  const Looked l = Lookup(table, {second, first});
  ASSERT_EQ(l.found, (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(RowVersion(second, {l.rows.data(), kRowBytes}), 1);
  EXPECT_EQ(RowVersion(first, {l.rows.data() + kRowBytes, kRowBytes}), 0);
  EXPECT_EQ(l.dirty, (std::vector<uint8_t>{1, 0}));
  // `second`'s first tag match is `first`'s entry; `first` matches itself.
  EXPECT_EQ(l.counts.retries, 1u);
}

TEST(DramLookupTest, ARowChangedWhileItsStripeIsHeldComesOutWhole) {
  // A writer holds the stripe from before the lookup starts until after it
  // rewrote the row: whenever the lookup copies it, the count is odd or
  // moves, so the row comes from the locked path, which waits for the
  // writer. Whatever the interleaving, the lookup returns the new row,
  // whole.
  HandMadeTable table(4);
  table.Put(7, 0, false);
  Looked l;
  std::latch started(2);
  table.stripe().mu.lock();
  std::thread reader([&] {
    started.arrive_and_wait();
    l = Lookup(table, {7});
  });
  started.arrive_and_wait();
  for (uint64_t version = 1; version <= 64; ++version) table.WriteRow(7, 0, version);
  table.stripe().mu.unlock();
  reader.join();
  ASSERT_EQ(l.found, (std::vector<uint8_t>{1}));
  EXPECT_EQ(RowVersion(7, {l.rows.data(), kRowBytes}), 64);
}

TEST(DramLookupTest, LookupsWhileTheIndexGrowsFindEveryRowPublishedBeforeThem) {
  // One writer fills a cache far from full (no eviction), so each stripe's
  // index grows many times; readers look up keys whose Insert returned
  // before their Lookup began: every one is found, whole.
  constexpr uint32_t kRow = 32;
  constexpr uint64_t kRows = 1 << 14;
  constexpr uint64_t kBatch = 128;
  const std::vector<TableSpec> tables = {{3, "emb", kRow}};
  DramCacheOptions o;
  o.dram_bytes_max = 2 * kRows * kRow;
  o.lock_stripes = 4;
  o.shards = 2;
  auto made = DramCache::Create(o, tables, nullptr);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  DramCache& cache = **made;
  auto key_of = [](uint64_t i) { return i * 0x9e3779b97f4a7c15ull + 1; };
  std::atomic<uint64_t> published{0};
  std::latch start(3);
  std::vector<std::thread> readers;
  std::atomic<uint64_t> checked{0};
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(r);
      std::vector<Key> keys(64);
      std::vector<std::byte> out(keys.size() * kRow);
      std::vector<uint8_t> found(keys.size());
      start.arrive_and_wait();
      while (true) {
        const uint64_t n = published.load(std::memory_order_acquire);
        if (n == kRows) break;
        if (n == 0) continue;
        for (Key& k : keys) k = key_of(rng() % n);
        ASSERT_TRUE(cache.Lookup(3, keys, out, found, {}).ok());
        for (size_t i = 0; i < keys.size(); ++i) {
          ASSERT_EQ(found[i], 1) << "key " << keys[i] << " published before the lookup";
          ASSERT_EQ(RowVersion(keys[i], {out.data() + i * kRow, kRow}), 1) << "key " << keys[i];
        }
        checked.fetch_add(keys.size(), std::memory_order_relaxed);
      }
    });
  }
  start.arrive_and_wait();
  for (uint64_t i = 0; i < kRows; i += kBatch) {
    std::vector<Key> keys;
    for (uint64_t j = i; j < i + kBatch; ++j) keys.push_back(key_of(j));
    ASSERT_TRUE(cache.Insert(3, keys, testing::MakeRows(keys, 1, kRow), {}, {}).ok());
    published.store(i + kBatch, std::memory_order_release);
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(cache.Stats().rows, kRows);
  EXPECT_EQ(cache.Stats().evictions, 0u);
}

TEST(DramLookupTest, RowsReadWhileAWriterChurnsTheCacheAreWholeTheirKeysAndFound) {
  // Rows a move up holds (never evicted) are overwritten now and then, with
  // the dirty flag of their version's parity, while the writer churns other
  // keys through a small cache (evictions, slot reuse, cuckoo moves,
  // erases). Every read of a held row must find it, whole, with its flag;
  // every other row found must be whole and its key's. Without the count's
  // check at the end of the pipeline this fails (review of the change: 32
  // bad reads in a run of this shape).
  constexpr uint32_t kRow = 32;
  constexpr TableId kTable = 5;
  auto key_of = [](uint64_t i) { return i * 0x9e3779b97f4a7c15ull + 11; };
  const std::vector<TableSpec> tables = {{kTable, "emb", kRow}};
  DramCacheOptions o;
  o.dram_bytes_max = 512 * kRow;
  o.lock_stripes = 2;
  o.shards = 1;
  auto made = DramCache::Create(o, tables, nullptr);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  DramCache& cache = **made;
  std::vector<Key> held;
  for (uint64_t i = 0; i < 64; ++i) held.push_back(key_of(1000000 + i));
  ASSERT_TRUE(cache.Insert(kTable, held, testing::MakeRows(held, 2, kRow), {}, {}).ok());
  DramCache::MoveUp move;
  ASSERT_TRUE(cache.BeginMoveUp(kTable, held, &move).ok());
  std::atomic<bool> done{false};
  std::atomic<uint64_t> bad{0}, checked{0};
  std::latch start(2);
  std::thread reader([&] {
    std::mt19937_64 rng(2);
    std::vector<Key> keys(128);
    std::vector<std::byte> out(keys.size() * kRow);
    std::vector<uint8_t> found(keys.size()), dirty(keys.size());
    start.arrive_and_wait();
    do {
      for (size_t i = 0; i < keys.size(); ++i) {
        keys[i] = i % 2 == 1 ? held[rng() % held.size()] : key_of(rng() % 4000);
      }
      ASSERT_TRUE(cache.Lookup(kTable, keys, out, found, dirty).ok());
      for (size_t i = 0; i < keys.size(); ++i) {
        const bool is_held = i % 2 == 1;
        if (found[i] == 0) {
          if (is_held) bad.fetch_add(1);
          continue;
        }
        const int64_t v = RowVersion(keys[i], {out.data() + i * kRow, kRow});
        const uint8_t want_dirty = is_held && v >= 3 ? static_cast<uint8_t>(v & 1) : 0;
        if (v < 0 || dirty[i] != want_dirty) bad.fetch_add(1);
        checked.fetch_add(1);
      }
    } while (!done.load());
  });
  std::mt19937_64 rng(1);
  start.arrive_and_wait();
  Status s;  // the writer's first error; the reader is joined whatever happens
  for (uint64_t v = 3; v < 20000 && s.ok(); ++v) {
    std::vector<Key> keys;
    for (int j = 0; j < 24; ++j) keys.push_back(key_of(rng() % 4000));
    s = cache.Insert(kTable, keys, testing::MakeRows(keys, v, kRow), {}, {});
    if (s.ok() && v % 3 == 0) {
      const std::vector<Key> one = {held[rng() % held.size()]};
      const std::vector<uint8_t> flag = {static_cast<uint8_t>(v & 1)};
      s = cache.Insert(kTable, one, testing::MakeRows(one, v, kRow), flag, {});
    }
    if (s.ok() && v % 7 == 0) {
      const std::vector<Key> gone = {key_of(rng() % 4000)};
      s = cache.Erase(kTable, gone);
    }
  }
  done = true;
  reader.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(cache.EndMoveUp(kTable, held, &move, /*moved=*/false).ok());
  EXPECT_EQ(bad.load(), 0u) << "of " << checked.load() << " rows read";
  EXPECT_GT(checked.load(), 0u);
  EXPECT_GT(cache.Stats().evictions, 0u);
}

}  // namespace
}  // namespace strata::storage
