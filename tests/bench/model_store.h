// ModelStore: a Store with the public API's semantics and none of its
// machinery (one mutex, one map per table, SGD in place), for testing the
// replay driver without the engine. Knobs inject the bugs --verify must
// catch: a lost push, a row served for the wrong key.
#pragma once

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include "base/hash.h"
#include "base/mutex.h"
#include "strata/store.h"

namespace strata::bench::testing {

class ModelStore : public Store {
 public:
  // Intent windows seen: (start - the worker's clock at the call) -> keys.
  struct IntentLog {
    std::map<int64_t, uint64_t> lead_counts;
  };
  struct Knobs {
    uint64_t lose_push_number = 0;  // drop the Nth pushed key (1-based; 0: never)
    uint64_t wrong_row_number = 0;  // serve the Nth pulled key from another key's row
    // A Pull of more keys than this fails with IOError and changes nothing,
    // as the engine's chunked Pull does when one chunk meets an I/O error
    // (0: never).
    size_t pull_keys_ok_max = 0;
    // Every Pull of this table fails with IOError (-1: none).
    int64_t failing_table = -1;
    std::shared_ptr<IntentLog> log;  // outlives the store (the driver owns the store)
  };

  ModelStore(std::vector<TableOptions> tables, Knobs knobs, const StoreOptions& options = {})
      : tables_(std::move(tables)), knobs_(knobs) {
    base::MutexLock lock(&mu_);  // not shared yet; for the analysis
    rows_.resize(tables_.size());
    stats_.t0.rows_max = options.device_rows_max;
    stats_.t1.rows_max = options.dram_rows_max;
  }

  Result<WorkerId> RegisterWorker(int) override {
    base::MutexLock lock(&mu_);
    clocks_.push_back(0);
    return static_cast<WorkerId>(clocks_.size() - 1);
  }
  Status Intent(WorkerId w, TableId, std::span<const Key> keys, Clock start, Clock end) override {
    base::MutexLock lock(&mu_);
    if (start >= end) return Status::InvalidArgument("start >= end");
    if (knobs_.log) knobs_.log->lead_counts[start - clocks_.at(w)]++;
    stats_.intents += keys.size();
    return Status::Ok();
  }
  Status Intent(WorkerId w, std::span<const TableKeys> keys, Clock start, Clock end) override {
    for (const auto& tk : keys) STRATA_RETURN_IF_ERROR(Intent(w, tk.table, tk.keys, start, end));
    return Status::Ok();
  }
  Status AdvanceClock(WorkerId w) override {
    base::MutexLock lock(&mu_);
    clocks_.at(w)++;
    return Status::Ok();
  }
  Result<Clock> CurrentClock(WorkerId w) const override {
    base::MutexLock lock(&mu_);
    return clocks_.at(w);
  }
  Status Pull(WorkerId, TableId t, std::span<const Key> keys, float* out, void*) override {
    base::MutexLock lock(&mu_);
    if ((knobs_.pull_keys_ok_max != 0 && keys.size() > knobs_.pull_keys_ok_max) ||
        static_cast<int64_t>(t) == knobs_.failing_table) {
      failed_pulls_.fetch_add(1);
      return Status::IOError("injected: Pull of " + std::to_string(keys.size()) + " keys");
    }
    const uint32_t dim = tables_.at(t).dim;
    for (size_t i = 0; i < keys.size(); ++i) {
      Key k = keys[i];
      if (++pulled_ == knobs_.wrong_row_number) k ^= 1;
      const auto& row = Row(t, k);
      std::memcpy(out + i * dim, row.data(), dim * sizeof(float));
    }
    stats_.pulls += keys.size();
    stats_.t0.hits += keys.size();
    return Status::Ok();
  }
  Status Push(WorkerId, TableId t, std::span<const Key> keys, const float* grads, void*) override {
    base::MutexLock lock(&mu_);
    const uint32_t dim = tables_.at(t).dim;
    std::unordered_map<Key, std::vector<float>> summed;  // duplicates summed first
    for (size_t i = 0; i < keys.size(); ++i) {
      if (++pushed_ == knobs_.lose_push_number) continue;
      auto& g = summed[keys[i]];
      g.resize(dim, 0.0f);
      for (uint32_t d = 0; d < dim; ++d) g[d] += grads[i * dim + d];
    }
    for (auto& [k, g] : summed) {
      auto& row = Row(t, k);
      for (uint32_t d = 0; d < dim; ++d) row[d] -= tables_[t].optimizer.learning_rate * g[d];
    }
    stats_.pushes += keys.size();
    return Status::Ok();
  }
  Status DrainIntents() override { return Status::Ok(); }
  Status ScanTable(TableId t,
                   const std::function<Status(Key, std::span<const float>)>& fn) override {
    base::MutexLock lock(&mu_);
    for (const auto& [k, row] : rows_.at(t)) STRATA_RETURN_IF_ERROR(fn(k, row));
    return Status::Ok();
  }
  Status Checkpoint() override { return Status::Ok(); }
  StoreStats Stats() const override {
    base::MutexLock lock(&mu_);
    return stats_;
  }
  Result<TableId> FindTable(const std::string& name) const override {
    for (TableId t = 0; t < tables_.size(); ++t) {
      if (tables_[t].name == name) return t;
    }
    return Status::NotFound(name);
  }
  const std::vector<TableOptions>& Tables() const override { return tables_; }
  Status Close() override { return Status::Ok(); }

 private:
  std::vector<float>& Row(TableId t, Key k) REQUIRES(mu_) {
    auto [it, fresh] = rows_[t].try_emplace(k);
    if (fresh) {  // deterministic initializer per (table, key)
      SplitMix64 rng(k * 31 + t);
      it->second.resize(tables_[t].dim);
      for (auto& v : it->second) v = static_cast<float>(rng.NextDouble() * 0.02 - 0.01);
    }
    return it->second;
  }

  const std::vector<TableOptions> tables_;
  const Knobs knobs_;
  mutable base::Mutex mu_;
  std::vector<std::unordered_map<Key, std::vector<float>>> rows_ GUARDED_BY(mu_);
  std::vector<Clock> clocks_ GUARDED_BY(mu_);
  StoreStats stats_ GUARDED_BY(mu_);
  uint64_t pulled_ GUARDED_BY(mu_) = 0;
  uint64_t pushed_ GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> failed_pulls_{0};
};

}  // namespace strata::bench::testing
