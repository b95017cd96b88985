// Run-time GPU discovery for the kernels module. The CUDA build answers from
// the driver (cudaGetDeviceCount); the host-only build answers 0. Callers take
// the GPU path only when VisibleGpuCount() > 0. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "strata/status.h"

namespace strata::kernels {

// Visible CUDA devices; 0 when there is no GPU or no driver (never an error).
int VisibleGpuCount();

// ", CUDA sm_90" or ", host runner only".
std::string CudaBuildInfo();

}  // namespace strata::kernels

namespace strata::kernels::detail {

// CUDA runtime calls behind Runner::kGpu (gpu_runtime.cu; the host-only build
// answers FailedPrecondition). Each turns a cudaError_t into a Status naming
// the call and its bytes, through base::CudaStatus (base/cuda_status.h), the
// conversion every CUDA caller uses. stream is a cudaStream_t (nullptr:
// default stream).
enum class GpuCopyKind : uint8_t { kHostToDevice, kDeviceToHost, kDeviceToDevice };
[[nodiscard]] Status GpuAllocate(size_t bytes, void** out);
void GpuFree(void* ptr);
// Page-locked host memory (cudaMallocHost): copies between it and the
// device on a stream are asynchronous.
[[nodiscard]] Status GpuHostAllocate(size_t bytes, void** out);
void GpuHostFree(void* ptr);
[[nodiscard]] Status GpuCopy(void* dst, const void* src, size_t bytes, GpuCopyKind kind,
                             void* stream);
[[nodiscard]] Status GpuMemset(void* dst, int value, size_t bytes, void* stream);
[[nodiscard]] Status GpuSync(void* stream);
[[nodiscard]] Status GpuSetDevice(int device);
// True when `ptr` points into device memory (cudaMalloc); false for host
// memory, managed memory, and in the host-only build.
bool GpuIsDeviceMemory(const void* ptr);

}  // namespace strata::kernels::detail
