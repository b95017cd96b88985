// DeviceTable: creation, argument checks and dispatch to the runner back ends
// (device_table_host.cc, device_table_gpu.cu).
#include "kernels/device_table.h"

#include <cmath>
#include <sstream>
#include <string>

#include "kernels/gpu_runtime.h"

namespace strata::kernels {
namespace {

using detail::kOpErase;
using detail::kOpPin;
using detail::kOpSetNextUse;
using detail::kOpUnpin;

std::string Show(float v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

Status Bad(const std::string& what) { return Status::InvalidArgument("DeviceTable: " + what); }

// The one check of a table's row options (dim, optimizer, initializer): the
// engine passes TableOptions through unchanged and names the table.
Status CheckOptions(const DeviceTableOptions& o) {
  if (o.capacity_rows == 0 || o.capacity_rows > kCapacityRowsMax) {
    return Bad("capacity_rows " + std::to_string(o.capacity_rows) + " must be in [1, " +
               std::to_string(kCapacityRowsMax) + "]");
  }
  if (o.dim == 0 || o.dim > kTableDimMax) {
    return Bad("dim " + std::to_string(o.dim) + " must be in [1, " + std::to_string(kTableDimMax) +
               "]");
  }
  if (o.batch_keys_max == 0 || o.batch_keys_max > kBatchKeysMax) {
    return Bad("batch_keys_max " + std::to_string(o.batch_keys_max) + " must be in [1, " +
               std::to_string(kBatchKeysMax) + "]");
  }
  const OptimizerOptions& opt = o.optimizer;
  const std::string name = OptimizerName(opt.kind);
  // A negative learning rate is allowed: it turns descent into accumulation
  // (exact push counting in tests).
  if (!std::isfinite(opt.learning_rate)) {
    return Bad("optimizer.learning_rate " + Show(opt.learning_rate) + " must be finite");
  }
  if (!(opt.epsilon >= 0.0f) || !(opt.initial_accumulator >= 0.0f)) {
    return Bad("optimizer.epsilon " + Show(opt.epsilon) + " and initial_accumulator " +
               Show(opt.initial_accumulator) + " must be >= 0");
  }
  if (opt.kind == Optimizer::kAdam &&
      !(opt.beta1 >= 0.0f && opt.beta1 < 1.0f && opt.beta2 >= 0.0f && opt.beta2 < 1.0f)) {
    return Bad("optimizer.beta1 " + Show(opt.beta1) + " and beta2 " + Show(opt.beta2) +
               " must be in [0, 1) for " + name);
  }
  if (opt.kind == Optimizer::kFtrl && !(opt.ftrl_alpha > 0.0f && opt.ftrl_beta >= 0.0f &&
                                        opt.ftrl_l1 >= 0.0f && opt.ftrl_l2 >= 0.0f)) {
    return Bad("optimizer.ftrl_alpha " + Show(opt.ftrl_alpha) + " must be > 0 and ftrl_beta " +
               Show(opt.ftrl_beta) + ", ftrl_l1 " + Show(opt.ftrl_l1) + ", ftrl_l2 " +
               Show(opt.ftrl_l2) + " >= 0 for " + name);
  }
  if (!(o.initializer.scale >= 0.0f)) {
    return Bad("initializer scale (init_scale) " + Show(o.initializer.scale) + " must be >= 0");
  }
  return Status::Ok();
}

// Smallest prime >= n (trial division; n < 2^29 here).
uint64_t NextPrime(uint64_t n) {
  auto prime = [](uint64_t x) {
    if (x < 2) return false;
    for (uint64_t d = 2; d * d <= x; ++d) {
      if (x % d == 0) return false;
    }
    return true;
  };
  while (!prime(n)) ++n;
  return n;
}

}  // namespace

const char* OptimizerName(Optimizer kind) {
  switch (kind) {
    case Optimizer::kSgd:
      return "sgd";
    case Optimizer::kAdagrad:
      return "adagrad";
    case Optimizer::kRowwiseAdagrad:
      return "rowwise_adagrad";
    case Optimizer::kAdam:
      return "adam";
    case Optimizer::kFtrl:
      return "ftrl";
  }
  return "unknown";
}

DeviceTable::DeviceTable(const DeviceTableOptions& options, Runner runner)
    : options_(options), runner_(runner) {}

DeviceTable::~DeviceTable() {
  if (runner_ == Runner::kGpu) GpuRelease();
}

Result<std::unique_ptr<DeviceTable>> DeviceTable::Create(const DeviceTableOptions& options,
                                                         Runner runner) {
  STRATA_RETURN_IF_ERROR(CheckOptions(options));
  if (runner == Runner::kGpu && VisibleGpuCount() == 0) {
    return Status::FailedPrecondition("DeviceTable: runner gpu requested but no GPU is visible" +
                                      CudaBuildInfo());
  }
  std::unique_ptr<DeviceTable> table(new DeviceTable(options, runner));
  STRATA_RETURN_IF_ERROR(table->Allocate());
  return table;
}

Status DeviceTable::Allocate() {
  const double slots_min = std::ceil(static_cast<double>(options_.capacity_rows) / kLoadFactorMax);
  uint64_t num_buckets = (static_cast<uint64_t>(slots_min) + kBucketSlots - 1) / kBucketSlots;
  // A prime bucket count makes every double-hashing step coprime with it,
  // so a probe sequence never revisits a bucket within the probe bound.
  if (num_buckets > kProbeBucketsMax) num_buckets = NextPrime(num_buckets);
  const uint64_t slots = num_buckets * kBucketSlots;
  const uint32_t row_floats = options_.dim + StateFloats(options_.optimizer.kind, options_.dim);
  if (runner_ == Runner::kGpu) STRATA_RETURN_IF_ERROR(GpuInit());
  const Runner r = runner_;
  STRATA_RETURN_IF_ERROR(keys_.Allocate(r, slots));
  STRATA_RETURN_IF_ERROR(states_.Allocate(r, slots));
  STRATA_RETURN_IF_ERROR(rows_.Allocate(r, slots * row_floats));
  STRATA_RETURN_IF_ERROR(next_use_.Allocate(r, slots));
  STRATA_RETURN_IF_ERROR(pins_.Allocate(r, slots));
  STRATA_RETURN_IF_ERROR(dirty_.Allocate(r, slots));
  STRATA_RETURN_IF_ERROR(overflow_.Allocate(r, num_buckets));
  STRATA_RETURN_IF_ERROR(counters_.Allocate(r, detail::kTableCounterWords));
  STRATA_RETURN_IF_ERROR(owner_.Allocate(r, slots));
  STRATA_RETURN_IF_ERROR(slot_of_.Allocate(r, options_.batch_keys_max));
  // The words FindTouch and FindNonFinite read back; allocated here so that
  // no call fails (or frees page-locked memory) after it queued work on a
  // stream.
  STRATA_RETURN_IF_ERROR(host_word_.Reserve(r, 2));
  STRATA_RETURN_IF_ERROR(RunnerMemset(r, keys_.data(), 0, keys_.bytes()));
  STRATA_RETURN_IF_ERROR(RunnerMemset(r, states_.data(), 0, states_.bytes()));
  STRATA_RETURN_IF_ERROR(RunnerMemset(r, next_use_.data(), 0, next_use_.bytes()));
  STRATA_RETURN_IF_ERROR(RunnerMemset(r, pins_.data(), 0, pins_.bytes()));
  STRATA_RETURN_IF_ERROR(RunnerMemset(r, dirty_.data(), 0, dirty_.bytes()));
  STRATA_RETURN_IF_ERROR(RunnerMemset(r, overflow_.data(), 0, overflow_.bytes()));
  STRATA_RETURN_IF_ERROR(RunnerMemset(r, counters_.data(), 0, counters_.bytes()));
  STRATA_RETURN_IF_ERROR(RunnerMemset(r, owner_.data(), 0, owner_.bytes()));
  ref_.keys = keys_.data();
  ref_.states = states_.data();
  ref_.rows = rows_.data();
  ref_.next_use = next_use_.data();
  ref_.pins = pins_.data();
  ref_.dirty = dirty_.data();
  ref_.overflow = overflow_.data();
  ref_.size = counters_.data();
  ref_.num_buckets = num_buckets;
  ref_.dim = options_.dim;
  ref_.row_floats = row_floats;
  ref_.probe_buckets = static_cast<uint32_t>(std::min<uint64_t>(kProbeBucketsMax, num_buckets));
  return RunnerSync(r, nullptr);
}

Status DeviceTable::CheckBatch(const char* op, const Key* keys, uint64_t n) const {
  if (n > options_.batch_keys_max) {
    return Status::InvalidArgument(std::string("DeviceTable::") + op + ": " + std::to_string(n) +
                                   " keys exceed batch_keys_max " +
                                   std::to_string(options_.batch_keys_max));
  }
  if (n > 0 && keys == nullptr) {
    return Status::InvalidArgument(std::string("DeviceTable::") + op + ": keys is null");
  }
  return Status::Ok();
}

Status DeviceTable::NoRoom(const char* op, uint64_t failed, uint64_t n, Key first_key) const {
  return Status::ResourceExhausted(std::string("DeviceTable::") + op + ": " +
                                   std::to_string(failed) + " of " + std::to_string(n) +
                                   " keys found no free slot within the probe bound (first key " +
                                   std::to_string(first_key) + ", size " + std::to_string(Size()) +
                                   " of " + std::to_string(slots()) + " slots)");
}

Status DeviceTable::NotResident(const char* op, uint64_t failed, Key first_key) {
  return Status::NotFound(std::string("DeviceTable::") + op + ": key " + std::to_string(first_key) +
                          " (and " + std::to_string(failed - 1) +
                          " more) not resident; nothing applied");
}

#define STRATA_CHECK_ARG(cond, op, what)                                               \
  do {                                                                                 \
    if (n > 0 && !(cond)) {                                                            \
      return Status::InvalidArgument(std::string("DeviceTable::") + (op) + ": " what); \
    }                                                                                  \
  } while (0)

Status DeviceTable::FindAsync(const Key* keys, uint64_t n, float* values, uint8_t* found,
                              void* stream) {
  STRATA_RETURN_IF_ERROR(CheckBatch("Find", keys, n));
  STRATA_CHECK_ARG(found != nullptr, "Find", "found is null");
  if (runner_ == Runner::kHost) return HostFind(keys, n, values, options_.dim, found);
  return GpuFind(keys, n, values, options_.dim, found, stream);
}

Status DeviceTable::Find(const Key* keys, uint64_t n, float* values, uint8_t* found) {
  STRATA_RETURN_IF_ERROR(FindAsync(keys, n, values, found, nullptr));
  return Synchronize(nullptr);
}

Status DeviceTable::FindTouch(const TouchBatch& batch, uint64_t* missing, void* stream) {
  const uint64_t n = batch.n;
  STRATA_RETURN_IF_ERROR(CheckBatch("FindTouch", batch.keys, n));
  STRATA_CHECK_ARG(batch.out != nullptr, "FindTouch", "out is null");
  if (missing == nullptr) return Status::InvalidArgument("DeviceTable::FindTouch: missing is null");
  *missing = 0;
  if (n == 0) return Status::Ok();
  if (runner_ == Runner::kHost) return HostFindTouch(batch, missing);
  return GpuFindTouch(batch, missing, stream);
}

Status DeviceTable::FindRows(const Key* keys, uint64_t n, float* rows, uint8_t* found) {
  STRATA_RETURN_IF_ERROR(CheckBatch("FindRows", keys, n));
  STRATA_CHECK_ARG(found != nullptr, "FindRows", "found is null");
  if (runner_ == Runner::kHost) return HostFind(keys, n, rows, ref_.row_floats, found);
  STRATA_RETURN_IF_ERROR(GpuFind(keys, n, rows, ref_.row_floats, found, nullptr));
  return Synchronize(nullptr);
}

Status DeviceTable::FindOrInsertAsync(const Key* keys, uint64_t n, float* values, uint8_t* inserted,
                                      int64_t next_use, void* stream) {
  STRATA_RETURN_IF_ERROR(CheckBatch("FindOrInsert", keys, n));
  STRATA_CHECK_ARG(inserted != nullptr, "FindOrInsert", "inserted is null");
  if (runner_ == Runner::kHost) return HostFindOrInsert(keys, n, values, inserted, next_use);
  return GpuFindOrInsert(keys, n, values, inserted, next_use, stream);
}

Status DeviceTable::FindOrInsert(const Key* keys, uint64_t n, float* values, uint8_t* inserted,
                                 int64_t next_use) {
  STRATA_RETURN_IF_ERROR(FindOrInsertAsync(keys, n, values, inserted, next_use, nullptr));
  return Synchronize(nullptr);
}

Status DeviceTable::InsertOrAssignAsync(const Key* keys, uint64_t n, const float* rows,
                                        const int64_t* next_use, const uint8_t* dirty,
                                        void* stream) {
  STRATA_RETURN_IF_ERROR(CheckBatch("InsertOrAssign", keys, n));
  STRATA_CHECK_ARG(rows != nullptr, "InsertOrAssign", "rows is null");
  if (runner_ == Runner::kHost) return HostInsertOrAssign(keys, n, rows, next_use, dirty);
  return GpuInsertOrAssign(keys, n, rows, next_use, dirty, stream);
}

Status DeviceTable::InsertOrAssign(const Key* keys, uint64_t n, const float* rows,
                                   const int64_t* next_use, const uint8_t* dirty) {
  STRATA_RETURN_IF_ERROR(InsertOrAssignAsync(keys, n, rows, next_use, dirty, nullptr));
  return Synchronize(nullptr);
}

Status DeviceTable::Erase(const Key* keys, uint64_t n) {
  STRATA_RETURN_IF_ERROR(CheckBatch("Erase", keys, n));
  if (runner_ == Runner::kHost) return HostForEachFound(keys, n, kOpErase, nullptr, nullptr);
  STRATA_RETURN_IF_ERROR(GpuForEachFound(keys, n, kOpErase, nullptr, nullptr, nullptr));
  return Synchronize(nullptr);
}

Status DeviceTable::Pin(const Key* keys, uint64_t n, uint8_t* found) {
  STRATA_RETURN_IF_ERROR(CheckBatch("Pin", keys, n));
  if (runner_ == Runner::kHost) return HostForEachFound(keys, n, kOpPin, nullptr, found);
  STRATA_RETURN_IF_ERROR(GpuForEachFound(keys, n, kOpPin, nullptr, found, nullptr));
  return Synchronize(nullptr);
}

Status DeviceTable::Unpin(const Key* keys, uint64_t n) {
  STRATA_RETURN_IF_ERROR(CheckBatch("Unpin", keys, n));
  if (runner_ == Runner::kHost) return HostForEachFound(keys, n, kOpUnpin, nullptr, nullptr);
  STRATA_RETURN_IF_ERROR(GpuForEachFound(keys, n, kOpUnpin, nullptr, nullptr, nullptr));
  return Synchronize(nullptr);
}

Status DeviceTable::SetNextUse(const Key* keys, uint64_t n, const int64_t* next_use) {
  STRATA_RETURN_IF_ERROR(CheckBatch("SetNextUse", keys, n));
  STRATA_CHECK_ARG(next_use != nullptr, "SetNextUse", "next_use is null");
  if (runner_ == Runner::kHost) return HostForEachFound(keys, n, kOpSetNextUse, next_use, nullptr);
  STRATA_RETURN_IF_ERROR(GpuForEachFound(keys, n, kOpSetNextUse, next_use, nullptr, nullptr));
  return Synchronize(nullptr);
}

Status DeviceTable::PushAsync(const Key* keys, uint64_t n, const float* grads, void* stream) {
  STRATA_RETURN_IF_ERROR(CheckBatch("Push", keys, n));
  STRATA_CHECK_ARG(grads != nullptr, "Push", "grads is null");
  if (runner_ == Runner::kHost) return HostPush(keys, n, grads);
  return GpuPush(keys, n, grads, stream);
}

Status DeviceTable::FindNonFinite(const float* grads, uint64_t n, uint64_t* rows,
                                  uint64_t* first_index, void* stream) {
  if (rows == nullptr || first_index == nullptr) {
    return Status::InvalidArgument("DeviceTable::FindNonFinite: rows or first_index is null");
  }
  *rows = 0;
  *first_index = n;
  if (n == 0) return Status::Ok();
  STRATA_CHECK_ARG(grads != nullptr, "FindNonFinite", "grads is null");
  if (runner_ == Runner::kHost) return HostFindNonFinite(grads, n, rows, first_index);
  return GpuFindNonFinite(grads, n, rows, first_index, stream);
}

Status DeviceTable::Push(const Key* keys, uint64_t n, const float* grads) {
  STRATA_RETURN_IF_ERROR(PushAsync(keys, n, grads, nullptr));
  return Synchronize(nullptr);
}

Status DeviceTable::EvictCandidates(uint64_t k, RowBatch* out) {
  if (out == nullptr) return Status::InvalidArgument("DeviceTable::EvictCandidates: out is null");
  out->count = 0;
  if (k == 0) return Status::Ok();
  if (out->keys == nullptr || out->rows == nullptr || out->next_use == nullptr ||
      out->dirty == nullptr) {
    return Status::InvalidArgument("DeviceTable::EvictCandidates: an output buffer is null");
  }
  if (runner_ == Runner::kHost) return HostEvict(k, out);
  return GpuEvict(k, out);
}

Status DeviceTable::LargestNextUses(uint64_t k, int64_t* out_host, uint64_t* count) {
  if (count == nullptr)
    return Status::InvalidArgument("DeviceTable::LargestNextUses: count is null");
  *count = 0;
  if (k == 0) return Status::Ok();
  if (out_host == nullptr) {
    return Status::InvalidArgument("DeviceTable::LargestNextUses: out_host is null");
  }
  if (runner_ == Runner::kHost) return HostLargestNextUses(k, out_host, count);
  return GpuLargestNextUses(k, out_host, count);
}

Status DeviceTable::ExportAll(const std::function<Status(const RowBatch&)>& fn) {
  if (runner_ == Runner::kHost) return HostExportAll(fn);
  return GpuExportAll(fn);
}

Status DeviceTable::Synchronize(void* stream) {
  if (runner_ == Runner::kHost) return Status::Ok();
  return GpuSynchronize(stream);
}

uint64_t DeviceTable::Size() const {
  if (runner_ == Runner::kGpu) return GpuSize();
  return std::atomic_ref<uint64_t>(*ref_.size).load(std::memory_order_acquire);
}

double DeviceTable::LoadFactor() const {
  return static_cast<double>(Size()) / static_cast<double>(slots());
}

}  // namespace strata::kernels
