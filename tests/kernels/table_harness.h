// Test helper: drives a DeviceTable with host vectors, copying through
// runner memory so the same test body runs on the host runner and the GPU.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kernels/device_table.h"
#include "kernels/gpu_runtime.h"

namespace strata::kernels::testing {

struct HostRunner {
  static constexpr Runner kRunner = Runner::kHost;
};
struct GpuRunner {
  static constexpr Runner kRunner = Runner::kGpu;
};

template <class T>
RunnerBuffer<T> ToRunner(Runner r, const std::vector<T>& v) {
  RunnerBuffer<T> b;
  EXPECT_TRUE(b.Allocate(r, v.size() + 1).ok());
  EXPECT_TRUE(RunnerCopyIn(r, b.data(), v.data(), v.size() * sizeof(T)).ok());
  return b;
}

template <class T>
RunnerBuffer<T> RunnerArray(Runner r, size_t n) {
  RunnerBuffer<T> b;
  EXPECT_TRUE(b.Allocate(r, n + 1).ok());
  EXPECT_TRUE(RunnerMemset(r, b.data(), 0, b.bytes()).ok());
  return b;
}

template <class T>
std::vector<T> FromRunner(const RunnerBuffer<T>& b, size_t n) {
  std::vector<T> v(n);
  EXPECT_TRUE(RunnerCopyOut(b.runner(), v.data(), b.data(), n * sizeof(T)).ok());
  return v;
}

struct ExportedRow {
  std::vector<float> row;
  int64_t next_use = 0;
  uint8_t dirty = 0;
};

class Harness {
 public:
  explicit Harness(DeviceTable* table) : t_(table), r_(table->runner()) {}

  Status Find(const std::vector<Key>& keys, std::vector<float>* values,
              std::vector<uint8_t>* found) {
    auto k = ToRunner(r_, keys);
    auto v = RunnerArray<float>(r_, keys.size() * t_->dim());
    auto f = RunnerArray<uint8_t>(r_, keys.size());
    Status s = t_->Find(k.data(), keys.size(), v.data(), f.data());
    *values = FromRunner(v, keys.size() * t_->dim());
    *found = FromRunner(f, keys.size());
    return s;
  }
  Status FindRows(const std::vector<Key>& keys, std::vector<float>* rows,
                  std::vector<uint8_t>* found) {
    auto k = ToRunner(r_, keys);
    auto v = RunnerArray<float>(r_, keys.size() * t_->row_floats());
    auto f = RunnerArray<uint8_t>(r_, keys.size());
    Status s = t_->FindRows(k.data(), keys.size(), v.data(), f.data());
    *rows = FromRunner(v, keys.size() * t_->row_floats());
    *found = FromRunner(f, keys.size());
    return s;
  }
  Status FindOrInsert(const std::vector<Key>& keys, std::vector<float>* values,
                      std::vector<uint8_t>* inserted, int64_t next_use) {
    auto k = ToRunner(r_, keys);
    auto v = RunnerArray<float>(r_, keys.size() * t_->dim());
    auto f = RunnerArray<uint8_t>(r_, keys.size());
    Status s = t_->FindOrInsert(k.data(), keys.size(), v.data(), f.data(), next_use);
    if (values != nullptr) *values = FromRunner(v, keys.size() * t_->dim());
    if (inserted != nullptr) *inserted = FromRunner(f, keys.size());
    return s;
  }
  Status InsertOrAssign(const std::vector<Key>& keys, const std::vector<float>& rows,
                        const std::vector<int64_t>& next_use, const std::vector<uint8_t>& dirty) {
    auto k = ToRunner(r_, keys);
    auto v = ToRunner(r_, rows);
    auto nu = ToRunner(r_, next_use);
    auto d = ToRunner(r_, dirty);
    return t_->InsertOrAssign(k.data(), keys.size(), v.data(),
                              next_use.empty() ? nullptr : nu.data(),
                              dirty.empty() ? nullptr : d.data());
  }
  Status Erase(const std::vector<Key>& keys) {
    auto k = ToRunner(r_, keys);
    return t_->Erase(k.data(), keys.size());
  }
  Status Pin(const std::vector<Key>& keys, std::vector<uint8_t>* found = nullptr) {
    auto k = ToRunner(r_, keys);
    auto f = RunnerArray<uint8_t>(r_, keys.size());
    Status s = t_->Pin(k.data(), keys.size(), f.data());
    if (found != nullptr) *found = FromRunner(f, keys.size());
    return s;
  }
  Status Unpin(const std::vector<Key>& keys) {
    auto k = ToRunner(r_, keys);
    return t_->Unpin(k.data(), keys.size());
  }
  Status SetNextUse(const std::vector<Key>& keys, const std::vector<int64_t>& next_use) {
    auto k = ToRunner(r_, keys);
    auto nu = ToRunner(r_, next_use);
    return t_->SetNextUse(k.data(), keys.size(), nu.data());
  }
  // FindTouch into *out (its rows written where found, others kept);
  // next_use empty: next_use_all; out_rows empty: row i for key i.
  Status FindTouch(const std::vector<Key>& keys, const std::vector<uint32_t>& out_rows,
                   const std::vector<int64_t>& next_use, int64_t next_use_all,
                   std::vector<float>* out, std::vector<uint8_t>* found, uint64_t* missing) {
    auto k = ToRunner(r_, keys);
    auto rows_at = ToRunner(r_, out_rows);
    auto nu = ToRunner(r_, next_use);
    auto o = ToRunner(r_, *out);
    auto f = RunnerArray<uint8_t>(r_, keys.size());
    TouchBatch b;
    b.keys = k.data();
    b.n = keys.size();
    b.out = o.data();
    b.out_rows = out_rows.empty() ? nullptr : rows_at.data();
    b.next_use = next_use.empty() ? nullptr : nu.data();
    b.next_use_all = next_use_all;
    b.found = f.data();
    Status s = t_->FindTouch(b, missing, nullptr);
    *out = FromRunner(o, out->size());
    *found = FromRunner(f, keys.size());
    return s;
  }
  Status Push(const std::vector<Key>& keys, const std::vector<float>& grads) {
    auto k = ToRunner(r_, keys);
    auto g = ToRunner(r_, grads);
    return t_->Push(k.data(), keys.size(), g.data());
  }
  // Evicted rows in output order.
  Status Evict(uint64_t k, std::vector<Key>* keys, std::vector<ExportedRow>* rows) {
    auto ok = RunnerArray<Key>(r_, k);
    auto orows = RunnerArray<float>(r_, k * t_->row_floats());
    auto onu = RunnerArray<int64_t>(r_, k);
    auto od = RunnerArray<uint8_t>(r_, k);
    RowBatch out{ok.data(), orows.data(), onu.data(), od.data(), 0};
    Status s = t_->EvictCandidates(k, &out);
    *keys = FromRunner(ok, out.count);
    auto all_rows = FromRunner(orows, out.count * t_->row_floats());
    auto nu = FromRunner(onu, out.count);
    auto d = FromRunner(od, out.count);
    rows->clear();
    for (uint64_t i = 0; i < out.count; ++i) {
      ExportedRow e;
      e.row.assign(all_rows.begin() + i * t_->row_floats(),
                   all_rows.begin() + (i + 1) * t_->row_floats());
      e.next_use = nu[i];
      e.dirty = d[i];
      rows->push_back(std::move(e));
    }
    return s;
  }
  std::map<Key, ExportedRow> ExportAll() {
    std::map<Key, ExportedRow> out;
    const uint32_t rf = t_->row_floats();
    Status s = t_->ExportAll([&](const RowBatch& b) {
      std::vector<Key> keys(b.count);
      std::vector<float> rows(b.count * rf);
      std::vector<int64_t> nu(b.count);
      std::vector<uint8_t> d(b.count);
      STRATA_RETURN_IF_ERROR(RunnerCopyOut(r_, keys.data(), b.keys, b.count * sizeof(Key)));
      STRATA_RETURN_IF_ERROR(RunnerCopyOut(r_, rows.data(), b.rows, rows.size() * sizeof(float)));
      STRATA_RETURN_IF_ERROR(RunnerCopyOut(r_, nu.data(), b.next_use, b.count * sizeof(int64_t)));
      STRATA_RETURN_IF_ERROR(RunnerCopyOut(r_, d.data(), b.dirty, b.count));
      for (uint64_t i = 0; i < b.count; ++i) {
        EXPECT_EQ(out.count(keys[i]), 0u) << "key exported twice: " << keys[i];
        ExportedRow& e = out[keys[i]];
        e.row.assign(rows.begin() + i * rf, rows.begin() + (i + 1) * rf);
        e.next_use = nu[i];
        e.dirty = d[i];
      }
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

 private:
  DeviceTable* t_;
  Runner r_;
};

inline std::unique_ptr<DeviceTable> MakeTable(Runner runner, const DeviceTableOptions& o) {
  auto t = DeviceTable::Create(o, runner);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(t).value() : nullptr;
}

}  // namespace strata::kernels::testing
