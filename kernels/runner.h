// Where a DeviceTable runs and the memory its batched calls take.
//
// Runner::kGpu: kernels on a CUDA device; every pointer handed to a table is
// device memory and `stream` is a cudaStream_t (nullptr: the legacy default
// stream). Runner::kHost: the same per-key code on a process-wide thread pool;
// pointers are host memory and streams are ignored (calls complete before
// returning). The engine never calls CUDA itself: it allocates and copies
// through RunnerBuffer and RunnerCopy*, so a host-only build links the same.
//
// Thread safety: the free functions are thread-safe. A RunnerBuffer is a
// value owned by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "strata/status.h"

namespace strata::kernels {

enum class Runner : uint8_t { kHost, kGpu };

// kGpu when use_gpu and a CUDA device is visible (gpu_runtime.h), else kHost.
Runner DefaultRunner(bool use_gpu);

// "host" or "gpu".
const char* RunnerName(Runner runner);

// Raw runner memory: device memory (cudaMalloc) on kGpu, aligned host memory
// on kHost. kGpu in a build without CUDA, or with no device, is
// FailedPrecondition. RunnerFree(nullptr) is a no-op.
[[nodiscard]] Status RunnerAllocate(Runner runner, size_t bytes, void** out);
void RunnerFree(Runner runner, void* ptr);

// Copies between host and runner memory, or within runner memory. With a
// stream on kGpu the copy is asynchronous (host memory must stay valid until
// RunnerSync); without one it completes before returning.
[[nodiscard]] Status RunnerCopyIn(Runner runner, void* dst_runner, const void* src_host,
                                  size_t bytes, void* stream = nullptr);
[[nodiscard]] Status RunnerCopyOut(Runner runner, void* dst_host, const void* src_runner,
                                   size_t bytes, void* stream = nullptr);
[[nodiscard]] Status RunnerCopy(Runner runner, void* dst_runner, const void* src_runner,
                                size_t bytes, void* stream = nullptr);
// Sets bytes of runner memory to `value`.
[[nodiscard]] Status RunnerMemset(Runner runner, void* dst_runner, int value, size_t bytes,
                                  void* stream = nullptr);
// Waits for everything issued on `stream` (kHost: nothing to wait for).
[[nodiscard]] Status RunnerSync(Runner runner, void* stream);

// Host memory that staging copies to and from the runner go through:
// page-locked on kGpu (so a copy on a stream is asynchronous and ordered with
// the kernels on it), plain aligned memory on kHost.
[[nodiscard]] Status HostStagingAllocate(Runner runner, size_t bytes, void** out);
void HostStagingFree(Runner runner, void* ptr);

// A growable host staging array (HostStagingAllocate) of trivially copyable
// T. Reserve keeps nothing of the old contents.
template <class T>
class HostStaging {
 public:
  HostStaging() = default;
  ~HostStaging() { Reset(); }
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;

  // At least `count` elements (doubling), allocated for `runner`.
  [[nodiscard]] Status Reserve(Runner runner, size_t count) {
    if (data_ != nullptr && size_ >= count && runner_ == runner) return Status::Ok();
    const size_t want = count > size_ * 2 ? count : size_ * 2;
    Reset();
    void* ptr = nullptr;
    STRATA_RETURN_IF_ERROR(HostStagingAllocate(runner, want * sizeof(T), &ptr));
    runner_ = runner;
    data_ = static_cast<T*>(ptr);
    size_ = want;
    return Status::Ok();
  }
  void Reset() {
    if (data_ != nullptr) HostStagingFree(runner_, data_);
    data_ = nullptr;
    size_ = 0;
  }
  T* data() { return data_; }
  size_t size() const { return size_; }

 private:
  Runner runner_ = Runner::kHost;
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Owning, movable array of `count` T in runner memory. T must be trivially
// copyable (it is memcpy'd between host and device).
template <class T>
class RunnerBuffer {
 public:
  RunnerBuffer() = default;
  ~RunnerBuffer() { Reset(); }
  RunnerBuffer(const RunnerBuffer&) = delete;
  RunnerBuffer& operator=(const RunnerBuffer&) = delete;
  RunnerBuffer(RunnerBuffer&& other) noexcept { *this = std::move(other); }
  RunnerBuffer& operator=(RunnerBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      runner_ = other.runner_;
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }

  // Frees what it held and allocates `count` elements (contents undefined).
  [[nodiscard]] Status Allocate(Runner runner, size_t count) {
    Reset();
    void* ptr = nullptr;
    STRATA_RETURN_IF_ERROR(RunnerAllocate(runner, count * sizeof(T), &ptr));
    runner_ = runner;
    data_ = static_cast<T*>(ptr);
    size_ = count;
    return Status::Ok();
  }
  void Reset() {
    if (data_ != nullptr) RunnerFree(runner_, data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }
  Runner runner() const { return runner_; }

 private:
  Runner runner_ = Runner::kHost;
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace strata::kernels
