// Runner memory: host memory for kHost, CUDA device memory (gpu_runtime.h)
// for kGpu.
#include "kernels/runner.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/gpu_runtime.h"

namespace strata::kernels {

Runner DefaultRunner(bool use_gpu) {
  return use_gpu && VisibleGpuCount() > 0 ? Runner::kGpu : Runner::kHost;
}

const char* RunnerName(Runner runner) { return runner == Runner::kGpu ? "gpu" : "host"; }

Status RunnerAllocate(Runner runner, size_t bytes, void** out) {
  *out = nullptr;
  if (runner == Runner::kGpu) return detail::GpuAllocate(bytes, out);
  if (bytes == 0) return Status::Ok();
  constexpr size_t kAlign = 64;
  void* ptr = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (ptr == nullptr) {
    return Status::ResourceExhausted("RunnerAllocate: host allocation of " + std::to_string(bytes) +
                                     " bytes failed");
  }
  *out = ptr;
  return Status::Ok();
}

Status HostStagingAllocate(Runner runner, size_t bytes, void** out) {
  if (runner == Runner::kGpu) return detail::GpuHostAllocate(bytes, out);
  return RunnerAllocate(Runner::kHost, bytes, out);
}

void HostStagingFree(Runner runner, void* ptr) {
  if (runner == Runner::kGpu) {
    detail::GpuHostFree(ptr);
  } else {
    std::free(ptr);
  }
}

void RunnerFree(Runner runner, void* ptr) {
  if (runner == Runner::kGpu) {
    detail::GpuFree(ptr);
  } else {
    std::free(ptr);
  }
}

Status RunnerCopyIn(Runner runner, void* dst_runner, const void* src_host, size_t bytes,
                    void* stream) {
  if (runner == Runner::kGpu) {
    return detail::GpuCopy(dst_runner, src_host, bytes, detail::GpuCopyKind::kHostToDevice, stream);
  }
  if (bytes > 0) std::memcpy(dst_runner, src_host, bytes);
  return Status::Ok();
}

Status RunnerCopyOut(Runner runner, void* dst_host, const void* src_runner, size_t bytes,
                     void* stream) {
  if (runner == Runner::kGpu) {
    return detail::GpuCopy(dst_host, src_runner, bytes, detail::GpuCopyKind::kDeviceToHost, stream);
  }
  if (bytes > 0) std::memcpy(dst_host, src_runner, bytes);
  return Status::Ok();
}

Status RunnerCopy(Runner runner, void* dst_runner, const void* src_runner, size_t bytes,
                  void* stream) {
  if (runner == Runner::kGpu) {
    return detail::GpuCopy(dst_runner, src_runner, bytes, detail::GpuCopyKind::kDeviceToDevice,
                           stream);
  }
  if (bytes > 0) std::memmove(dst_runner, src_runner, bytes);
  return Status::Ok();
}

Status RunnerMemset(Runner runner, void* dst_runner, int value, size_t bytes, void* stream) {
  if (runner == Runner::kGpu) return detail::GpuMemset(dst_runner, value, bytes, stream);
  if (bytes > 0) std::memset(dst_runner, value, bytes);
  return Status::Ok();
}

Status RunnerSync(Runner runner, void* stream) {
  if (runner == Runner::kGpu) return detail::GpuSync(stream);
  return Status::Ok();
}

}  // namespace strata::kernels
