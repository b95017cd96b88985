// DenseSync (include/strata/dense_sync.h): local Adam, and every k steps one
// MPI_Allreduce of every buffer's parameters and second moment, packed into
// one staging vector (parameters of buffer 0, 1, ..., then their second
// moments), summed, divided by the rank count and unpacked. Device buffers
// are copied to host staging around each step (CUDA builds).
#include "strata/dense_sync.h"

#include <chrono>
#include <climits>
#include <cmath>
#include <vector>

#include "cluster/mpi_comm.h"

#if STRATA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace strata {
namespace {

struct DenseBuffer {
  std::string name;
  float* params;
  const float* grads;
  size_t count;
  DenseMemory memory;
  std::vector<float> m;  // first moment (beta1 > 0 only)
  std::vector<float> v;  // second moment
  // kDevice: host copies of the parameters and gradients during a step.
  std::vector<float> host_params, host_grads;
};

// The floats one merge all-reduces, at most.
constexpr uint64_t kMergeFloatsMax = INT_MAX;

Status CopyDevice(void* dst, const void* src, size_t bytes, bool to_host, const std::string& name) {
#if STRATA_HAVE_CUDA
  const cudaError_t rc =
      cudaMemcpy(dst, src, bytes, to_host ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice);
  if (rc != cudaSuccess) {
    return Status::Unavailable("DenseSync: buffer '" + name +
                               "': cudaMemcpy: " + cudaGetErrorString(rc));
  }
  return Status::Ok();
#else
  (void)dst, (void)src, (void)bytes, (void)to_host;
  return Status::FailedPrecondition("DenseSync: buffer '" + name +
                                    "' is device memory but this build has no CUDA");
#endif
}

class DenseSyncImpl final : public DenseSync {
 public:
  DenseSyncImpl(const DenseSyncOptions& options, std::unique_ptr<cluster::MpiComm> comm)
      : options_(options), comm_(std::move(comm)) {}

  Result<uint32_t> Register(const std::string& name, float* params, const float* grads,
                            size_t count, DenseMemory memory) override {
    const std::string what = "DenseSync::Register('" + name + "')";
    if (stats_.steps > 0) return Status::FailedPrecondition(what + ": after the first Step");
    if (params == nullptr || grads == nullptr || count == 0) {
      return Status::InvalidArgument(what + ": null buffer or no parameters");
    }
    if (total_floats_ + count > kMergeFloatsMax / 2) {
      return Status::ResourceExhausted(what + ": more than 2^30 parameters in all");
    }
#if !STRATA_HAVE_CUDA
    if (memory == DenseMemory::kDevice) {
      return Status::FailedPrecondition(what + ": device memory, but this build has no CUDA");
    }
#endif
    DenseBuffer b{name, params, grads, count, memory, {}, {}, {}, {}};
    if (options_.beta1 > 0) b.m.assign(count, 0.0f);
    b.v.assign(count, 0.0f);
    if (memory == DenseMemory::kDevice) {
      b.host_params.resize(count);
      b.host_grads.resize(count);
    }
    buffers_.push_back(std::move(b));
    total_floats_ += count;
    return static_cast<uint32_t>(buffers_.size() - 1);
  }

  Status Step() override {
    ++step_;
    b1_power_ *= options_.beta1;
    b2_power_ *= options_.beta2;
    for (DenseBuffer& b : buffers_) STRATA_RETURN_IF_ERROR(Apply(b));
    ++stats_.steps;
    if (++stats_.unmerged_steps < options_.merge_every_steps) return Status::Ok();
    return Merge();
  }

  Status Merge() override {
    STRATA_RETURN_IF_ERROR(CheckShapes());
    staging_.resize(2 * total_floats_);
    size_t at = 0;
    for (DenseBuffer& b : buffers_) {
      const float* x = b.params;
      if (b.memory == DenseMemory::kDevice) {
        STRATA_RETURN_IF_ERROR(
            CopyDevice(b.host_params.data(), b.params, b.count * 4, true, b.name));
        x = b.host_params.data();
      }
      std::copy(x, x + b.count, staging_.begin() + at);
      std::copy(b.v.begin(), b.v.end(), staging_.begin() + total_floats_ + at);
      at += b.count;
    }
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(
        comm_->AllReduceSumInPlace(staging_.data(), static_cast<int>(staging_.size())));
    stats_.allreduce_us +=
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count());
    stats_.bytes_allreduced += staging_.size() * sizeof(float);
    ++stats_.merges;
    stats_.unmerged_steps = 0;
    const float inv = 1.0f / static_cast<float>(comm_->size());
    at = 0;
    for (DenseBuffer& b : buffers_) {
      float* x = b.memory == DenseMemory::kDevice ? b.host_params.data() : b.params;
      for (size_t i = 0; i < b.count; ++i) {
        x[i] = staging_[at + i] * inv;
        b.v[i] = staging_[total_floats_ + at + i] * inv;
      }
      if (b.memory == DenseMemory::kDevice) {
        STRATA_RETURN_IF_ERROR(CopyDevice(b.params, x, b.count * 4, false, b.name));
      }
      at += b.count;
    }
    return Status::Ok();
  }

  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }
  DenseSyncStats Stats() const override { return stats_; }

 private:
  // One Adam step of buffer b.
  Status Apply(DenseBuffer& b) {
    float* x = b.params;
    const float* g = b.grads;
    if (b.memory == DenseMemory::kDevice) {
      STRATA_RETURN_IF_ERROR(CopyDevice(b.host_params.data(), b.params, b.count * 4, true, b.name));
      STRATA_RETURN_IF_ERROR(CopyDevice(b.host_grads.data(), b.grads, b.count * 4, true, b.name));
      x = b.host_params.data();
      g = b.host_grads.data();
    }
    const float lr = options_.learning_rate;
    const float b1 = options_.beta1;
    const float b2 = options_.beta2;
    const float m_scale = 1.0f / (1.0f - b1_power_);
    const float v_scale = 1.0f / (1.0f - b2_power_);
    for (size_t i = 0; i < b.count; ++i) {
      float m = g[i];
      if (b1 > 0) m = b.m[i] = b1 * b.m[i] + (1.0f - b1) * g[i];
      b.v[i] = b2 * b.v[i] + (1.0f - b2) * g[i] * g[i];
      x[i] -= lr * (m * m_scale) / (std::sqrt(b.v[i] * v_scale) + options_.epsilon);
    }
    if (b.memory == DenseMemory::kDevice) {
      STRATA_RETURN_IF_ERROR(CopyDevice(b.params, x, b.count * 4, false, b.name));
    }
    return Status::Ok();
  }

  // Once: every rank registered the same buffer sizes, in the same order.
  Status CheckShapes() {
    if (shapes_checked_) return Status::Ok();
    std::string shape;
    for (const DenseBuffer& b : buffers_) shape += std::to_string(b.count) + " ";
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> all, comm_->AllGatherBytes(shape));
    for (size_t r = 1; r < all.size(); ++r) {
      if (all[r] != all[0]) {
        return Status::InvalidArgument("DenseSync::Merge: rank " + std::to_string(r) +
                                       " registered buffers of [" + all[r] + "] floats, rank 0 [" +
                                       all[0] + "]: every rank registers the same buffers");
      }
    }
    shapes_checked_ = true;
    return Status::Ok();
  }

  const DenseSyncOptions options_;
  std::unique_ptr<cluster::MpiComm> comm_;
  std::vector<DenseBuffer> buffers_;
  size_t total_floats_ = 0;
  std::vector<float> staging_;
  uint64_t step_ = 0;
  float b1_power_ = 1.0f;  // beta1^step, for the bias correction
  float b2_power_ = 1.0f;
  bool shapes_checked_ = false;
  DenseSyncStats stats_;
};

}  // namespace

Result<std::unique_ptr<DenseSync>> DenseSync::Create(const DenseSyncOptions& options,
                                                     MPI_Comm comm) {
  const bool ok = options.learning_rate > 0 && std::isfinite(options.learning_rate) &&
                  options.epsilon > 0 && options.beta1 >= 0 && options.beta1 < 1 &&
                  options.beta2 >= 0 && options.beta2 < 1 && options.merge_every_steps > 0;
  if (!ok) {
    return Status::InvalidArgument(
        "DenseSync::Create: learning_rate and epsilon > 0, beta1 and beta2 in [0, 1), "
        "merge_every_steps >= 1");
  }
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<cluster::MpiComm> dup, cluster::MpiComm::Dup(comm));
  dup->SetTimeout(options.collective_timeout_ms);
  return std::unique_ptr<DenseSync>(new DenseSyncImpl(options, std::move(dup)));
}

}  // namespace strata
