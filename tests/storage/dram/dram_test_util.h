// Helpers shared by the DRAM cache tests: self-describing rows, and the
// fixture of the one-table unit tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <span>
#include <vector>

#include "storage/dram/dram_cache.h"

namespace strata::storage::testing {

// A row of `row_bytes` (>= 16) whose 8-byte words are key, version, then
// key ^ version ^ word index: a torn or misplaced row is detectable.
inline std::vector<std::byte> MakeRow(Key key, uint64_t version, uint32_t row_bytes) {
  std::vector<std::byte> row(row_bytes);
  for (uint32_t off = 0, w = 0; off < row_bytes; off += 8, ++w) {
    uint64_t word = w == 0 ? key : w == 1 ? version : key ^ version ^ w;
    std::memcpy(row.data() + off, &word, std::min<uint32_t>(8, row_bytes - off));
  }
  return row;
}

// The version a MakeRow row carries, or -1 when it is not a well-formed row of `key`.
inline int64_t RowVersion(Key key, std::span<const std::byte> row) {
  std::vector<std::byte> expect = MakeRow(key, 0, static_cast<uint32_t>(row.size()));
  uint64_t version;
  std::memcpy(&version, row.data() + 8, 8);
  expect = MakeRow(key, version, static_cast<uint32_t>(row.size()));
  return std::memcmp(expect.data(), row.data(), row.size()) == 0 ? static_cast<int64_t>(version)
                                                                 : -1;
}

// Concatenated rows for a batch.
inline std::vector<std::byte> MakeRows(const std::vector<Key>& keys, uint64_t version,
                                       uint32_t row_bytes) {
  std::vector<std::byte> rows;
  for (Key k : keys) {
    auto row = MakeRow(k, version, row_bytes);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

// The fixture of the DramCache unit tests (dram_cache_test.cc,
// dram_cache_insert_test.cc, dram_clean_ahead_test.cc): caches of one table
// (kTable "emb", rows of kRowBytes) filled with MakeRow rows.
class DramCacheFixture : public ::testing::Test {
 protected:
  static constexpr uint32_t kRowBytes = 32;
  static constexpr TableId kTable = 7;

  static std::vector<TableSpec> OneTable() { return {{kTable, "emb", kRowBytes}}; }

  // A cache of `rows_max` rows of kRowBytes, writing back to `backing`.
  // `o` gives the other options (fallback range).
  static std::unique_ptr<DramCache> MakeCache(uint64_t rows_max, RowStore* backing = nullptr,
                                              std::vector<TableSpec> tables = OneTable(),
                                              DramCacheOptions o = {}) {
    o.dram_bytes_max = rows_max * kRowBytes;
    o.lock_stripes = 4;
    auto cache = DramCache::Create(o, tables, backing);
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    return cache.ok() ? std::move(cache).value() : nullptr;
  }

  // Inserts MakeRow(key, version) for each key.
  static Status Put(DramCache& c, std::vector<Key> keys, uint64_t version = 1,
                    std::vector<Clock> next_use = {}, std::vector<uint8_t> dirty = {},
                    TableId table = kTable, uint32_t row_bytes = kRowBytes) {
    auto rows = MakeRows(keys, version, row_bytes);
    return c.Insert(table, keys, rows, dirty, next_use);
  }

  // Looks keys up; returns found flags (not a use: the order stays).
  static std::vector<uint8_t> Get(DramCache& c, std::vector<Key> keys) {
    std::vector<std::byte> rows(keys.size() * kRowBytes);
    std::vector<uint8_t> found(keys.size());
    EXPECT_TRUE(c.Lookup(kTable, keys, rows, found, {}).ok());
    return found;
  }

  // Resident keys of a table, sorted (ForEach: no effect on eviction order).
  static std::vector<Key> ResidentKeys(DramCache& cache, TableId table) {
    std::vector<Key> keys;
    Status s = cache.ForEach(table, [&](Key k, std::span<const std::byte>, bool) {
      keys.push_back(k);
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    std::sort(keys.begin(), keys.end());
    return keys;
  }

  // The keys each Put of one of `keys` (next use `next_use`) evicted, in order.
  static std::vector<Key> EvictionOrder(DramCache& c, const std::vector<Key>& keys,
                                        Clock next_use) {
    std::vector<Key> order;
    for (Key k : keys) {
      auto before = ResidentKeys(c, kTable);
      EXPECT_TRUE(Put(c, {k}, 1, {next_use}).ok());
      auto after = ResidentKeys(c, kTable);
      std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                          std::back_inserter(order));
    }
    return order;
  }

  // Looks keys up; returns their dirty flags.
  static std::vector<uint8_t> DirtyFlags(DramCache& c, const std::vector<Key>& keys) {
    std::vector<std::byte> rows(keys.size() * kRowBytes);
    std::vector<uint8_t> found(keys.size()), dirty(keys.size());
    EXPECT_TRUE(c.Lookup(kTable, keys, rows, found, dirty).ok());
    return dirty;
  }
};

}  // namespace strata::storage::testing
