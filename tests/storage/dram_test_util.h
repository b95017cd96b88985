// Helpers shared by the DRAM cache tests: self-describing rows and a view of
// what a cache holds that does not disturb its eviction order.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "storage/dram_cache.h"

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

// Resident keys of a table, sorted (ForEach: no effect on eviction order).
inline std::vector<Key> ResidentKeys(DramCache& cache, TableId table) {
  std::vector<Key> keys;
  Status s = cache.ForEach(table, [&](Key k, std::span<const std::byte>, bool) {
    keys.push_back(k);
    return Status::Ok();
  });
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace strata::storage::testing
