// MemoryRowStore: an in-memory RowStore for tests, with fault switches.
//
// Rows live in one std::unordered_map per table. `FailNextPuts(n)` makes the
// next n MultiPut calls fail with IOError (optionally after applying a prefix
// of the batch, as a real store may); `FailNextGets(n)` does the same for
// MultiGet. Counters record calls and rows so tests can assert batching.
//
// Thread safety: every method takes one mutex. Ownership: the store copies
// the rows it is given.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "storage/ssd/row_store.h"

namespace strata::storage::testing {

class MemoryRowStore : public RowStore {
 public:
  explicit MemoryRowStore(std::vector<TableSpec> tables) : tables_(std::move(tables)) {
    base::MutexLock lock(&mu_);  // not shared yet; for the analysis
    for (const TableSpec& t : tables_) rows_[t.id];
  }

  // The next `calls` MultiPut calls fail; each first applies `prefix_rows` rows.
  void FailNextPuts(uint64_t calls, uint64_t prefix_rows = 0) {
    base::MutexLock lock(&mu_);
    fail_puts_ = calls;
    fail_prefix_rows_ = prefix_rows;
  }
  void FailNextGets(uint64_t calls) {
    base::MutexLock lock(&mu_);
    fail_gets_ = calls;
  }
  uint64_t put_calls() const {
    base::MutexLock lock(&mu_);
    return put_calls_;
  }
  uint64_t rows_put() const {
    base::MutexLock lock(&mu_);
    return rows_put_;
  }
  // A copy of one table's rows (key -> bytes).
  std::unordered_map<Key, std::vector<std::byte>> Rows(TableId table) const {
    base::MutexLock lock(&mu_);
    return rows_.at(table);
  }

  Status MultiGet(TableId table, std::span<const Key> keys, std::span<std::byte> rows,
                  std::span<uint8_t> found) override {
    base::MutexLock lock(&mu_);
    auto it = rows_.find(table);
    if (it == rows_.end()) return Status::InvalidArgument("unknown table " + std::to_string(table));
    if (fail_gets_ > 0) {
      --fail_gets_;
      return Status::IOError("memory row store: injected MultiGet failure");
    }
    const uint32_t rb = RowBytes(table);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto row = it->second.find(keys[i]);
      found[i] = row != it->second.end();
      if (found[i]) std::memcpy(rows.data() + i * rb, row->second.data(), rb);
    }
    return Status::Ok();
  }

  Status MultiPut(TableId table, std::span<const Key> keys,
                  std::span<const std::byte> rows) override {
    base::MutexLock lock(&mu_);
    auto it = rows_.find(table);
    if (it == rows_.end()) return Status::InvalidArgument("unknown table " + std::to_string(table));
    ++put_calls_;
    const uint32_t rb = RowBytes(table);
    uint64_t count = keys.size();
    bool fail = fail_puts_ > 0;
    if (fail) {
      --fail_puts_;
      count = std::min<uint64_t>(count, fail_prefix_rows_);
    }
    for (size_t i = 0; i < count; ++i) {
      const std::byte* src = rows.data() + i * rb;
      it->second[keys[i]].assign(src, src + rb);
    }
    rows_put_ += count;
    if (fail) return Status::IOError("memory row store: injected MultiPut failure");
    return Status::Ok();
  }

  Status Delete(TableId table, std::span<const Key> keys) override {
    base::MutexLock lock(&mu_);
    for (Key k : keys) rows_[table].erase(k);
    return Status::Ok();
  }
  Status Scan(TableId table,
              const std::function<Status(Key, std::span<const std::byte>)>& fn) override {
    base::MutexLock lock(&mu_);
    for (const auto& [k, row] : rows_[table]) STRATA_RETURN_IF_ERROR(fn(k, row));
    return Status::Ok();
  }
  Status Sync() override { return Status::Ok(); }
  Status Checkpoint(std::span<const std::byte> meta) override {
    base::MutexLock lock(&mu_);
    meta_.assign(meta.begin(), meta.end());
    return Status::Ok();
  }
  std::vector<std::byte> CheckpointMeta() const override {
    base::MutexLock lock(&mu_);
    return meta_;
  }
  RowStoreStats Stats() const override {
    base::MutexLock lock(&mu_);
    RowStoreStats s;
    for (const TableSpec& t : tables_) {
      s.live_rows += rows_.at(t.id).size();
      s.live_bytes += rows_.at(t.id).size() * t.row_bytes;
    }
    return s;
  }
  const std::vector<TableSpec>& Tables() const override { return tables_; }

 private:
  uint32_t RowBytes(TableId table) const {
    for (const TableSpec& t : tables_) {
      if (t.id == table) return t.row_bytes;
    }
    return 0;
  }

  const std::vector<TableSpec> tables_;
  mutable base::Mutex mu_;
  std::map<TableId, std::unordered_map<Key, std::vector<std::byte>>> rows_ GUARDED_BY(mu_);
  std::vector<std::byte> meta_ GUARDED_BY(mu_);
  uint64_t fail_puts_ GUARDED_BY(mu_) = 0;
  uint64_t fail_prefix_rows_ GUARDED_BY(mu_) = 0;
  uint64_t fail_gets_ GUARDED_BY(mu_) = 0;
  uint64_t put_calls_ GUARDED_BY(mu_) = 0;
  uint64_t rows_put_ GUARDED_BY(mu_) = 0;
};

}  // namespace strata::storage::testing
