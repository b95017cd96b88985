// Helpers shared by the row store tests: deterministic row contents, a
// std::unordered_map model per table, checks that a store's content equals
// the model through MultiGet and Scan, and the fixture of the native
// backend's tests (a store whose I/O goes through a FaultEnv).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/fault_env.h"
#include "storage/ssd/row_store.h"
#include "storage/ssd/row_store_factory.h"
#include "tests/util/scratch_dir.h"

namespace strata::storage::testing {

using Row = std::vector<std::byte>;
using Model = std::unordered_map<Key, Row>;

// The row written for `key` at `version`: its first 16 bytes name both (when
// the row is that long), the rest is a pattern of them.
inline Row MakeRow(Key key, uint64_t version, uint32_t row_bytes) {
  Row row(row_bytes);
  uint64_t x = key * 0x9E3779B97F4A7C15ull ^ (version + 1) * 0xD1B54A32D192ED03ull;
  for (uint32_t i = 0; i < row_bytes; ++i) {
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    row[i] = std::byte(x >> 56);
  }
  if (row_bytes >= 16) {
    std::memcpy(row.data(), &key, 8);
    std::memcpy(row.data() + 8, &version, 8);
  }
  return row;
}

inline Status PutRows(RowStore& store, TableId table, uint32_t row_bytes,
                      const std::vector<Key>& keys, uint64_t version, Model* model) {
  std::vector<std::byte> rows(keys.size() * row_bytes);
  for (size_t i = 0; i < keys.size(); ++i) {
    Row r = MakeRow(keys[i], version, row_bytes);
    std::memcpy(rows.data() + i * row_bytes, r.data(), row_bytes);
  }
  Status s = store.MultiPut(table, keys, rows);
  if (s.ok() && model != nullptr) {
    for (Key k : keys) (*model)[k] = MakeRow(k, version, row_bytes);
  }
  return s;
}

// PutRows with the `nth` write call to a ".log" file failing (once): on
// success `model` takes the rows, as PutRows; on failure it stays.
inline Status PutRowsFailingNthLogWrite(io::FaultEnv& env, RowStore& store, TableId table,
                                        uint32_t row_bytes, const std::vector<Key>& keys,
                                        uint64_t version, uint64_t nth, Model* model) {
  io::FaultRule rule;
  rule.op = io::FaultOp::kWrite;
  rule.path_substring = ".log";
  rule.nth_call = nth;
  rule.times_max = 1;
  if (Status s = env.AddRule(rule); !s.ok()) return s;
  Status s = PutRows(store, table, row_bytes, keys, version, model);
  env.ClearRules();
  return s;
}

// Every model key is found with its row, `absent` keys are missing, and Scan
// yields exactly the model.
inline void ExpectContent(RowStore& store, TableId table, uint32_t row_bytes, const Model& model,
                          const std::vector<Key>& absent = {}) {
  std::vector<Key> keys;
  for (const auto& [k, v] : model) keys.push_back(k);
  keys.insert(keys.end(), absent.begin(), absent.end());
  std::vector<std::byte> rows(keys.size() * row_bytes);
  std::vector<uint8_t> found(keys.size(), 7);
  ASSERT_TRUE(store.MultiGet(table, keys, rows, found).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = model.find(keys[i]);
    if (it == model.end()) {
      ASSERT_EQ(found[i], 0) << "key " << keys[i] << " should be missing";
      continue;
    }
    ASSERT_EQ(found[i], 1) << "key " << keys[i] << " should be present";
    ASSERT_EQ(std::memcmp(rows.data() + i * row_bytes, it->second.data(), row_bytes), 0)
        << "row of key " << keys[i];
  }
  Model scanned;
  ASSERT_TRUE(store
                  .Scan(table,
                        [&](Key k, std::span<const std::byte> row) {
                          EXPECT_EQ(row.size(), row_bytes);
                          EXPECT_TRUE(scanned.emplace(k, Row(row.begin(), row.end())).second)
                              << "key " << k << " scanned twice";
                          return Status::Ok();
                        })
                  .ok());
  ASSERT_EQ(scanned.size(), model.size());
  for (const auto& [k, v] : model) {
    auto it = scanned.find(k);
    ASSERT_TRUE(it != scanned.end()) << "scan misses key " << k;
    ASSERT_EQ(it->second, v) << "scan row of key " << k;
  }
}

inline std::vector<std::byte> Bytes(const std::string& s) {
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  return {p, p + s.size()};
}

// A native row store of one table in a scratch directory ("<scratch>/store"),
// every file-system call through fault_env_, so a test injects faults
// (AddRule) and power loss (DropUnsyncedWrites). Derived fixtures name the
// table and its row size.
class NativeRowStoreFixture : public ::testing::Test {
 protected:
  NativeRowStoreFixture(TableId table, uint32_t row_bytes)
      : table_(table), row_bytes_(row_bytes), fault_env_(io::Env::Default()) {}

  RowStoreOptions Options() {
    RowStoreOptions o;
    o.backend = SsdBackend::kNative;
    o.ssd_format_version = format_;
    o.ssd_segment_bytes = 64 << 10;  // format 2: many segments, the cleaner runs
    o.ssd_index = ssd_index_;
    o.dir = dir_.File("store");
    o.env = &fault_env_;
    return o;
  }
  // The store, or nullptr after recording the error (ASSERT_NE it).
  std::unique_ptr<RowStore> Open() {
    auto store = OpenRowStore(Options(), {{table_, "emb", row_bytes_}});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // A read error injected on files whose path holds `path_substring` fails
  // MultiGet of `key` with IOError; once cleared, the key reads again.
  void ExpectInjectedReadError(RowStore& store, const std::string& path_substring, Key key) {
    io::FaultRule rule;
    rule.op = io::FaultOp::kRead;
    rule.path_substring = path_substring;
    ASSERT_TRUE(fault_env_.AddRule(rule).ok());
    std::vector<Key> keys{key};
    std::vector<std::byte> row(row_bytes_);
    std::vector<uint8_t> found(1);
    Status s = store.MultiGet(table_, keys, row, found);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    fault_env_.ClearRules();
    ASSERT_TRUE(store.MultiGet(table_, keys, row, found).ok());
    EXPECT_EQ(found[0], 1);
  }

  const TableId table_;
  const uint32_t row_bytes_;
  uint32_t format_ = 1;                      // the native format of a new store
  SsdIndex ssd_index_ = SsdIndex::kCompact;  // format 2's DRAM index
  strata::testing::ScratchDir dir_;
  io::FaultEnv fault_env_;
};

}  // namespace strata::storage::testing
