// MemoryStore: a TEST DOUBLE of strata::Store for the training example's unit
// tests — one std::unordered_map per table, no tiers, no planner. It keeps the
// Store contract the trainer relies on (deterministic per-key initializer,
// AdaGrad applied once per key with duplicates summed, per-worker clocks) and
// checks the pipeline's side of it: calls naming one worker never overlap,
// and every pulled key was announced by an intent whose window holds the
// worker's clock at the Pull. Test code only; the real store is engine/.
//
// Thread safety: every method locks one mutex.
#pragma once

#include <atomic>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "base/mutex.h"
#include "strata/store.h"

namespace strata::train::testing {

class MemoryStore : public Store {
 public:
  explicit MemoryStore(std::vector<TableOptions> tables) : tables_(std::move(tables)) {
    base::MutexLock lock(&mu_);  // not shared yet; for the analysis
    rows_.resize(tables_.size());
  }

  Result<WorkerId> RegisterWorker(int) override {
    base::MutexLock lock(&mu_);
    clocks_.push_back(0);
    return static_cast<WorkerId>(clocks_.size() - 1);
  }

  Status Intent(WorkerId w, TableId table, std::span<const Key> keys, Clock start,
                Clock end) override {
    TableKeys tk{table, keys};
    return Intent(w, std::span<const TableKeys>(&tk, 1), start, end);
  }
  Status Intent(WorkerId w, std::span<const TableKeys> keys, Clock start, Clock end) override {
    Enter guard(this);
    base::MutexLock lock(&mu_);
    STRATA_RETURN_IF_ERROR(CheckWorker(w));
    if (start >= end) return Status::InvalidArgument("empty intent window");
    for (const TableKeys& tk : keys) {
      if (tk.table >= tables_.size()) return Status::InvalidArgument("unknown table");
      for (Key k : tk.keys) {
        windows_[{tk.table, k}].insert({start, end});
        ++stats_.intents;
      }
      max_lead_ = std::max(max_lead_, start - clocks_[w]);
    }
    return Status::Ok();
  }

  Status AdvanceClock(WorkerId w) override {
    Enter guard(this);
    base::MutexLock lock(&mu_);
    STRATA_RETURN_IF_ERROR(CheckWorker(w));
    ++clocks_[w];
    return Status::Ok();
  }
  Result<Clock> CurrentClock(WorkerId w) const override {
    base::MutexLock lock(&mu_);
    if (w >= clocks_.size()) return Status::InvalidArgument("unknown worker");
    return clocks_[w];
  }

  Status Pull(WorkerId w, TableId table, std::span<const Key> keys, float* out, void*) override {
    Enter guard(this);
    base::MutexLock lock(&mu_);
    STRATA_RETURN_IF_ERROR(CheckWorker(w));
    if (table >= tables_.size()) return Status::InvalidArgument("unknown table");
    const uint32_t dim = tables_[table].dim;
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::vector<float>& row = Row(table, keys[i]);
      std::copy(row.begin(), row.begin() + dim, out + i * dim);
      if (!Announced(table, keys[i], clocks_[w])) ++unannounced_pulls_;
    }
    stats_.pulls += keys.size();
    stats_.t0.hits += keys.size();
    return Status::Ok();
  }

  Status Push(WorkerId w, TableId table, std::span<const Key> keys, const float* grads,
              void*) override {
    Enter guard(this);
    base::MutexLock lock(&mu_);
    STRATA_RETURN_IF_ERROR(CheckWorker(w));
    if (table >= tables_.size()) return Status::InvalidArgument("unknown table");
    const TableOptions& t = tables_[table];
    std::map<Key, std::vector<float>> summed;  // duplicates summed, then one update per key
    for (size_t i = 0; i < keys.size(); ++i) {
      auto& g = summed[keys[i]];
      g.resize(t.dim, 0.0f);
      for (uint32_t c = 0; c < t.dim; ++c) g[c] += grads[i * t.dim + c];
    }
    for (auto& [key, g] : summed) {
      std::vector<float>& row = Row(table, key);  // [embedding, accumulators]
      for (uint32_t c = 0; c < t.dim; ++c) {
        row[t.dim + c] += g[c] * g[c];
        row[c] -=
            t.optimizer.learning_rate * g[c] / (std::sqrt(row[t.dim + c]) + t.optimizer.epsilon);
      }
    }
    stats_.pushes += keys.size();
    return Status::Ok();
  }

  Status DrainIntents() override { return Status::Ok(); }
  Status ScanTable(TableId table,
                   const std::function<Status(Key, std::span<const float>)>& fn) override {
    base::MutexLock lock(&mu_);
    if (table >= tables_.size()) return Status::InvalidArgument("unknown table");
    for (auto& [key, row] : rows_[table]) {
      STRATA_RETURN_IF_ERROR(fn(key, std::span<const float>(row).first(tables_[table].dim)));
    }
    return Status::Ok();
  }
  Status Checkpoint() override { return Status::Ok(); }
  StoreStats Stats() const override {
    base::MutexLock lock(&mu_);
    return stats_;
  }
  Result<TableId> FindTable(const std::string& name) const override {
    for (size_t i = 0; i < tables_.size(); ++i) {
      if (tables_[i].name == name) return static_cast<TableId>(i);
    }
    return Status::NotFound("no table " + name);
  }
  const std::vector<TableOptions>& Tables() const override { return tables_; }
  Status Close() override { return Status::Ok(); }

  // Checks for the tests.
  uint64_t unannounced_pulls() const {
    base::MutexLock lock(&mu_);
    return unannounced_pulls_;
  }
  Clock max_intent_lead() const {
    base::MutexLock lock(&mu_);
    return max_lead_;
  }
  bool overlapping_calls() const { return overlap_.load(); }

 private:
  // Flags two calls in flight at once (the trainer runs one worker).
  struct Enter {
    explicit Enter(MemoryStore* s) : s_(s) {
      if (s_->in_call_.fetch_add(1) != 0) s_->overlap_ = true;
    }
    ~Enter() { s_->in_call_.fetch_sub(1); }
    MemoryStore* s_;
  };

  Status CheckWorker(WorkerId w) const REQUIRES(mu_) {
    return w < clocks_.size() ? Status::Ok() : Status::InvalidArgument("unknown worker");
  }
  bool Announced(TableId table, Key key, Clock clock) const REQUIRES(mu_) {
    auto it = windows_.find({table, key});
    if (it == windows_.end()) return false;
    for (auto [start, end] : it->second) {
      if (start <= clock && clock < end) return true;
    }
    return false;
  }
  // The row of key, created by a deterministic per-(table, key) initializer.
  std::vector<float>& Row(TableId table, Key key) REQUIRES(mu_) {
    auto [it, inserted] = rows_[table].try_emplace(key);
    if (inserted) {
      const TableOptions& t = tables_[table];
      it->second.assign(2 * t.dim, 0.0f);
      uint64_t state = key * 0x9e3779b97f4a7c15ull + table;
      for (uint32_t c = 0; c < t.dim; ++c) {
        state ^= state >> 33;
        state *= 0xff51afd7ed558ccdull;
        state ^= state >> 33;
        state += 0x9e3779b97f4a7c15ull;
        double unit = static_cast<double>(state >> 11) * 0x1.0p-53;
        it->second[c] = static_cast<float>((2 * unit - 1) * t.init_scale);
      }
    }
    return it->second;
  }

  const std::vector<TableOptions> tables_;
  mutable base::Mutex mu_;
  std::vector<std::unordered_map<Key, std::vector<float>>> rows_ GUARDED_BY(mu_);
  std::vector<Clock> clocks_ GUARDED_BY(mu_);
  std::map<std::pair<TableId, Key>, std::set<std::pair<Clock, Clock>>> windows_ GUARDED_BY(mu_);
  StoreStats stats_ GUARDED_BY(mu_);
  uint64_t unannounced_pulls_ GUARDED_BY(mu_) = 0;
  Clock max_lead_ GUARDED_BY(mu_) = 0;
  std::atomic<int> in_call_{0};
  std::atomic<bool> overlap_{false};
};

}  // namespace strata::train::testing
