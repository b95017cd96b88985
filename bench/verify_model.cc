// VerifyModel: the expected rows of a verified replay (verify_model.h).
#include "bench/verify_model.h"

#include <cmath>
#include <cstring>

#include "base/assert.h"
#include "base/hash.h"
#include "strata/trace.h"

namespace strata::bench {
namespace {

// Occurrences of one key beyond which float rounding could reach half a step.
constexpr uint32_t kOccurrencesMax = 1u << 21;
// How far a recovered occurrence count may sit from an integer.
constexpr double kStepTolerance = 0.25;

}  // namespace

Result<std::unique_ptr<VerifyModel>> VerifyModel::Build(const std::string& trace_path, uint32_t dim,
                                                        uint32_t workers, uint64_t batches_max) {
  std::unique_ptr<VerifyModel> m(new VerifyModel(dim, workers));
  STRATA_ASSIGN_OR_RETURN(auto reader, trace::TraceReader::Open(trace_path));
  for (const auto& t : reader->header().tables) m->table_names_.push_back(t.name);
  trace::TraceBatch batch;
  // Only the batches the replay will run (--batches): the final check
  // expects exactly their pushes.
  for (uint64_t read = 0; batches_max == 0 || read < batches_max; ++read) {
    STRATA_ASSIGN_OR_RETURN(bool more, reader->Next(&batch));
    if (!more) break;
    for (const auto& t : batch.tables) {
      for (Key k : t.keys) {
        bool inserted = false;
        const uint32_t id = m->index_.Insert(t.table, k, &inserted);
        if (inserted) m->total_.push_back(0);
        if (++m->total_[id] > kOccurrencesMax) {
          return Status::InvalidArgument(
              "replay --verify: key " + std::to_string(k) + " of table " +
              m->table_names_[t.table] + " occurs more than " + std::to_string(kOccurrencesMax) +
              " times, beyond what the model checks exactly; verify a shorter trace");
        }
      }
    }
  }
  const uint64_t n = m->index_.size();
  m->step_exponent_.resize(n);
  for (uint64_t id = 0; id < n; ++id) {
    uint8_t e = 0;
    while ((uint64_t{1} << e) < m->total_[id]) ++e;
    m->step_exponent_[id] = e;
  }
  m->started_ = std::make_unique<std::atomic<uint32_t>[]>(n);
  m->init_state_ = std::make_unique<std::atomic<uint8_t>[]>(n);
  m->init_.assign(n * dim, 0.0f);
  m->own_completed_.assign(workers, std::vector<uint32_t>(n, 0));
  m->seen_.assign(n, 0);
  return m;
}

uint32_t VerifyModel::Id(TableId table, Key key) const {
  const uint32_t id = index_.Find(table, key);
  STRATA_ASSERT(id != trace::KeyIndex::kNone, "VerifyModel: key not in the trace");
  return id;
}

float VerifyModel::Sign(TableId table, Key key, uint32_t d) const {
  const uint64_t h = MixSplit64(key ^ (uint64_t{table} << 40) ^ (uint64_t{d / 64} << 20));
  return ((h >> (d % 64)) & 1) ? 1.0f : -1.0f;
}

void VerifyModel::Gradients(TableId table, std::span<const Key> keys, float* grads) const {
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t id = Id(table, keys[i]);
    const float step = std::ldexp(1.0f, -static_cast<int>(step_exponent_[id]));
    for (uint32_t d = 0; d < dim_; ++d) grads[i * dim_ + d] = Sign(table, keys[i], d) * step;
  }
}

int64_t VerifyModel::Recover(uint32_t id, const float* row) const {
  const TableId table = index_.TableOf(id);
  const Key key = index_.KeyOf(id);
  const double step = std::ldexp(1.0, -static_cast<int>(step_exponent_[id]));
  int64_t n = -1;
  for (uint32_t d = 0; d < dim_; ++d) {
    const double nd = (static_cast<double>(init_[uint64_t{id} * dim_ + d]) - row[d]) /
                      (Sign(table, key, d) * step);
    if (!std::isfinite(nd)) return -1;
    const double rounded = std::round(nd);
    if (std::abs(nd - rounded) > kStepTolerance || rounded < 0) return -1;
    if (d == 0) n = static_cast<int64_t>(rounded);
    if (static_cast<int64_t>(rounded) != n) return -1;
  }
  return n;
}

Status VerifyModel::Mismatch(const char* what, uint32_t worker, uint64_t batch, TableId table,
                             Key key, const float* row, int64_t lo, int64_t hi) const {
  const uint32_t id = Id(table, key);
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "replay --verify: %s: table %s key %llu batch %llu worker %u: row[0] = %.9g, "
                "init[0] = %.9g, expected %lld..%lld pushes applied (step 2^-%u), recovered %lld",
                what, table_names_[table].c_str(), static_cast<unsigned long long>(key),
                static_cast<unsigned long long>(batch), worker, static_cast<double>(row[0]),
                static_cast<double>(init_[uint64_t{id} * dim_]), static_cast<long long>(lo),
                static_cast<long long>(hi), step_exponent_[id],
                static_cast<long long>(Recover(id, row)));
  return Status::Corruption(buf);
}

void VerifyModel::ReadStarted(TableId table, std::span<const Key> keys,
                              std::vector<uint32_t>* started) const {
  started->resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    (*started)[i] = started_[Id(table, keys[i])].load(std::memory_order_acquire);
  }
}

Status VerifyModel::CheckPull(uint32_t worker, uint64_t batch, TableId table,
                              std::span<const Key> keys, const float* out,
                              std::span<const uint32_t> started_after,
                              std::vector<uint32_t>* recorded) {
  uint64_t checked = 0;
  if (recorded != nullptr) recorded->clear();
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t id = Id(table, keys[i]);
    const float* row = out + i * dim_;
    const int64_t lo = own_completed_[worker][id];
    const int64_t hi = started_after[i];
    uint8_t state = init_state_[id].load(std::memory_order_acquire);
    if (state == 0 && hi == 0 &&
        init_state_[id].compare_exchange_strong(state, 1, std::memory_order_acq_rel)) {
      // No push can have reached this row: it holds its initial value.
      std::memcpy(&init_[uint64_t{id} * dim_], row, dim_ * sizeof(float));
      init_state_[id].store(2, std::memory_order_release);
      state = 2;
      if (recorded != nullptr) recorded->push_back(static_cast<uint32_t>(i));
    }
    if (state != 2) continue;  // another pull is recording the initial value
    if (hi == 0 && std::memcmp(&init_[uint64_t{id} * dim_], row, dim_ * sizeof(float)) != 0) {
      return Mismatch("initial value differs between pulls", worker, batch, table, keys[i], row, lo,
                      hi);
    }
    const int64_t n = Recover(id, row);
    if (n < lo || n > hi) {
      return Mismatch(
          n < 0 ? "row is not the initial value plus whole pushes" : "pushes applied out of range",
          worker, batch, table, keys[i], row, lo, hi);
    }
    ++checked;
  }
  checked_rows_.fetch_add(checked, std::memory_order_relaxed);
  return Status::Ok();
}

Status VerifyModel::ShareInit(TableId table, Key key, std::span<const float> row) {
  const uint32_t id = index_.Find(table, key);
  if (id == trace::KeyIndex::kNone || row.size() != dim_) {
    return Status::Corruption("replay --verify: a shared initial value of table " +
                              std::to_string(table) + " key " + std::to_string(key) +
                              ", which the trace never touched (or of the wrong size)");
  }
  float* init = &init_[uint64_t{id} * dim_];
  uint8_t state = init_state_[id].load(std::memory_order_acquire);
  if (state == 0 && init_state_[id].compare_exchange_strong(state, 1, std::memory_order_acq_rel)) {
    std::memcpy(init, row.data(), dim_ * sizeof(float));
    init_state_[id].store(2, std::memory_order_release);
    return Status::Ok();
  }
  if (state == 2 && std::memcmp(init, row.data(), dim_ * sizeof(float)) != 0) {
    return Mismatch("initial value differs between ranks", 0, 0, table, key, row.data(), 0, 0);
  }
  return Status::Ok();
}

void VerifyModel::BeforePush(TableId table, std::span<const Key> keys) {
  for (Key k : keys) started_[Id(table, k)].fetch_add(1, std::memory_order_acq_rel);
}

void VerifyModel::AfterPush(uint32_t worker, TableId table, std::span<const Key> keys) {
  for (Key k : keys) own_completed_[worker][Id(table, k)]++;
}

Status VerifyModel::CheckFinal(TableId table, Key key, std::span<const float> row) {
  const uint32_t id = index_.Find(table, key);
  if (id == trace::KeyIndex::kNone) {
    return Status::Corruption("replay --verify: final scan: table " + table_names_[table] +
                              " holds key " + std::to_string(key) +
                              ", which the trace never touched");
  }
  if (row.size() != dim_) {
    return Status::Corruption("replay --verify: final scan: table " + table_names_[table] +
                              " key " + std::to_string(key) + " has " + std::to_string(row.size()) +
                              " floats, expected " + std::to_string(dim_));
  }
  if (seen_[id]) {
    return Status::Corruption("replay --verify: final scan: table " + table_names_[table] +
                              " returned key " + std::to_string(key) + " twice");
  }
  seen_[id] = 1;
  if (init_state_[id].load(std::memory_order_acquire) != 2) {
    return Status::Internal("replay --verify: no pull of table " + table_names_[table] + " key " +
                            std::to_string(key) + " recorded its initial value");
  }
  if (Recover(id, row.data()) != total_[id]) {
    return Mismatch("final value after all pushes", 0, UINT64_MAX, table, key, row.data(),
                    total_[id], total_[id]);
  }
  return Status::Ok();
}

std::vector<Key> VerifyModel::Keys(TableId table) const {
  std::vector<Key> keys;
  for (uint32_t id = 0; id < index_.size(); ++id) {
    if (index_.TableOf(id) == table) keys.push_back(index_.KeyOf(id));
  }
  return keys;
}

void VerifyModel::ForgetSeen(TableId table) {
  for (uint32_t id = 0; id < index_.size(); ++id) {
    if (index_.TableOf(id) == table) seen_[id] = 0;
  }
}

Status VerifyModel::CheckAllSeen() const {
  return CheckAllSeen([](TableId, Key) { return true; });
}

Status VerifyModel::CheckAllSeen(const std::function<bool(TableId, Key)>& mine) const {
  for (uint32_t id = 0; id < index_.size(); ++id) {
    if (!seen_[id] && mine(index_.TableOf(id), index_.KeyOf(id))) {
      return Status::NotFound("replay --verify: final scan: table " +
                              table_names_[index_.TableOf(id)] + " lost key " +
                              std::to_string(index_.KeyOf(id)));
    }
  }
  return Status::Ok();
}

}  // namespace strata::bench
