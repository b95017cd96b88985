#include "examples/train/batch_loader.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "base/hash.h"
#include "examples/train/limits.h"

namespace strata::train {
namespace {

// Fisher-Yates with splitmix64: the same permutation on every platform.
void Shuffle(std::vector<uint32_t>* rows, uint64_t seed) {
  SplitMix64 rng(seed);
  for (size_t i = rows->size(); i > 1; --i) {
    size_t j = static_cast<size_t>(rng.Next() % i);
    std::swap((*rows)[i - 1], (*rows)[j]);
  }
}

size_t CeilDiv(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace

Result<Schedule> MakeSchedule(size_t rows, const LoaderOptions& options) {
  if (options.batch_rows == 0 || options.batch_rows > kBatchRowsMax) {
    return Status::InvalidArgument("batch rows must be in [1, " + std::to_string(kBatchRowsMax) +
                                   "], not " + std::to_string(options.batch_rows));
  }
  if (options.epochs == 0 || options.epochs > kEpochsMax) {
    return Status::InvalidArgument("epochs must be in [1, " + std::to_string(kEpochsMax) + "]");
  }
  if (options.lookahead_batches == 0 || options.lookahead_batches > kLookaheadBatchesMax) {
    return Status::InvalidArgument("lookahead must be in [1, " +
                                   std::to_string(kLookaheadBatchesMax) + "] batches");
  }
  if (!(options.validation_fraction >= 0.0 && options.validation_fraction < 1.0)) {
    return Status::InvalidArgument("validation fraction must be in [0, 1)");
  }
  Schedule s;
  s.validation_rows =
      static_cast<size_t>(std::llround(static_cast<double>(rows) * options.validation_fraction));
  s.train_rows = rows - s.validation_rows;
  if (s.train_rows == 0) return Status::InvalidArgument("no training rows left after the split");
  s.train_batches = CeilDiv(s.train_rows, options.batch_rows);
  s.validation_batches = CeilDiv(s.validation_rows, options.batch_rows);
  s.epochs = options.epochs;
  return s;
}

BatchLoader::BatchLoader(const Dataset& data, const std::vector<TableId>& tables,
                         const LoaderOptions& options, Store* store, WorkerId worker,
                         Clock first_clock, std::mutex* worker_mu, trace::TraceWriter* trace)
    : data_(data),
      tables_(tables),
      options_(options),
      store_(store),
      worker_(worker),
      first_clock_(first_clock),
      worker_mu_(worker_mu),
      trace_(trace) {}

BatchLoader::~BatchLoader() { Stop(); }

Status BatchLoader::Start() {
  if (tables_.size() != data_.categorical_columns()) {
    return Status::InvalidArgument("loader: " + std::to_string(tables_.size()) + " tables for " +
                                   std::to_string(data_.categorical_columns()) + " columns");
  }
  if (options_.intents && store_ == nullptr) {
    return Status::InvalidArgument("loader: intents need a store");
  }
  STRATA_ASSIGN_OR_RETURN(schedule_, MakeSchedule(data_.rows(), options_));
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void BatchLoader::Stop() {
  {
    base::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

Result<std::unique_ptr<Batch>> BatchLoader::Next() {
  auto start = std::chrono::steady_clock::now();
  base::MutexLock lock(&mu_);
  while (queue_.empty() && !finished_ && status_.ok()) cv_.Wait(&mu_);
  wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!status_.ok()) return status_;
  if (queue_.empty()) return std::unique_ptr<Batch>();
  std::unique_ptr<Batch> batch = std::move(queue_.front());
  queue_.pop_front();
  lock.Unlock();
  cv_.SignalAll();
  return batch;
}

std::unique_ptr<Batch> BatchLoader::Build(size_t step, uint32_t epoch, bool train,
                                          std::span<const uint32_t> rows) const {
  auto batch = std::make_unique<Batch>();
  batch->clock = first_clock_ + static_cast<Clock>(step);
  batch->epoch = epoch;
  batch->train = train;
  batch->rows.assign(rows.begin(), rows.end());
  const size_t dense_columns = data_.dense_columns();
  const size_t tables = tables_.size();
  batch->labels.reserve(rows.size());
  batch->dense.reserve(rows.size() * dense_columns);
  batch->unique_keys.resize(tables);
  batch->slots.assign(rows.size() * tables, -1);
  std::vector<std::unordered_map<Key, int32_t>> slot_of(tables);
  for (size_t r = 0; r < rows.size(); ++r) {
    const uint32_t row = rows[r];
    batch->labels.push_back(data_.labels[row]);
    const float* dense = data_.DenseRow(row);
    batch->dense.insert(batch->dense.end(), dense, dense + dense_columns);
    for (size_t t = 0; t < tables; ++t) {
      if (!data_.Present(row, t)) continue;
      const Key key = data_.KeyAt(row, t);
      auto [it, inserted] =
          slot_of[t].try_emplace(key, static_cast<int32_t>(batch->unique_keys[t].size()));
      if (inserted) batch->unique_keys[t].push_back(key);
      batch->slots[r * tables + t] = it->second;
    }
  }
  return batch;
}

Status BatchLoader::AppendTrace(const Batch& batch) {
  if (trace_ == nullptr) return Status::Ok();
  trace::TraceBatch record;
  record.worker = 0;
  record.clock = batch.clock;
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (batch.unique_keys[t].empty()) continue;
    record.tables.push_back({tables_[t], batch.unique_keys[t]});
  }
  std::sort(record.tables.begin(), record.tables.end(),
            [](const auto& a, const auto& b) { return a.table < b.table; });  // format order
  return trace_->Append(record).WithContext("loader: trace of batch " +
                                            std::to_string(batch.clock));
}

Status BatchLoader::Signal(const Batch& batch) {
  STRATA_RETURN_IF_ERROR(AppendTrace(batch));
  if (!options_.intents) return Status::Ok();
  std::vector<TableKeys> keys;
  keys.reserve(tables_.size());
  for (size_t t = 0; t < tables_.size(); ++t) {
    if (!batch.unique_keys[t].empty()) keys.push_back({tables_[t], batch.unique_keys[t]});
  }
  std::unique_lock<std::mutex> lock;
  if (worker_mu_ != nullptr) lock = std::unique_lock<std::mutex>(*worker_mu_);
  return store_->Intent(worker_, keys, batch.clock, batch.clock + 1)
      .WithContext("loader: intent for batch " + std::to_string(batch.clock));
}

void BatchLoader::Run() {
  std::vector<uint32_t> train_rows(schedule_.train_rows);
  std::iota(train_rows.begin(), train_rows.end(), 0u);
  std::vector<uint32_t> validation_rows(schedule_.validation_rows);
  std::iota(validation_rows.begin(), validation_rows.end(),
            static_cast<uint32_t>(schedule_.train_rows));
  const size_t batch_rows = options_.batch_rows;
  size_t step = 0;
  auto emit = [&](uint32_t epoch, bool train, std::span<const uint32_t> rows) -> bool {
    {
      base::MutexLock lock(&mu_);
      while (!stop_ && queue_.size() >= options_.lookahead_batches) cv_.Wait(&mu_);
      if (stop_) return false;
    }
    std::unique_ptr<Batch> batch = Build(step++, epoch, train, rows);
    Status status = Signal(*batch);
    base::MutexLock lock(&mu_);
    if (!status.ok()) {
      status_ = status;
      cv_.SignalAll();
      return false;
    }
    queue_.push_back(std::move(batch));
    cv_.SignalAll();
    return true;
  };
  for (uint32_t epoch = 0; epoch < schedule_.epochs; ++epoch) {
    Shuffle(&train_rows, options_.seed * 0x100000001b3ull + epoch);
    for (size_t b = 0; b < schedule_.train_batches; ++b) {
      size_t begin = b * batch_rows, end = std::min(train_rows.size(), begin + batch_rows);
      if (!emit(epoch, true, std::span<const uint32_t>(train_rows).subspan(begin, end - begin))) {
        return;
      }
    }
    for (size_t b = 0; b < schedule_.validation_batches; ++b) {
      size_t begin = b * batch_rows, end = std::min(validation_rows.size(), begin + batch_rows);
      auto rows = std::span<const uint32_t>(validation_rows).subspan(begin, end - begin);
      if (!emit(epoch, false, rows)) return;
    }
  }
  base::MutexLock lock(&mu_);
  finished_ = true;
  cv_.SignalAll();
}

}  // namespace strata::train
