#include <cuda_runtime.h>

#include "kernels/gpu_runtime.h"

namespace strata::kernels {

int VisibleGpuCount() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
}

std::string CudaBuildInfo() {
  int runtime = 0;
  (void)cudaRuntimeGetVersion(&runtime);
  return ", CUDA runtime " + std::to_string(runtime / 1000) + "." +
         std::to_string((runtime % 1000) / 10) + ", " + std::to_string(VisibleGpuCount()) +
         " GPU(s) visible";
}

}  // namespace strata::kernels

namespace strata::kernels::detail {
namespace {

Status CudaStatus(cudaError_t err, const char* what, size_t bytes) {
  if (err == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  std::string msg = std::string(what) + " (" + std::to_string(bytes) +
                    " bytes): " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return Status::ResourceExhausted(std::move(msg));
  return Status::Internal(std::move(msg));
}

}  // namespace

Status GpuAllocate(size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMalloc(out, bytes), "cudaMalloc", bytes);
}

void GpuFree(void* ptr) {
  if (ptr != nullptr) (void)cudaFree(ptr);
}

Status GpuCopy(void* dst, const void* src, size_t bytes, GpuCopyKind kind, void* stream) {
  if (bytes == 0) return Status::Ok();
  const cudaMemcpyKind k = kind == GpuCopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                           : kind == GpuCopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                                : cudaMemcpyDeviceToDevice;
  if (stream == nullptr) return CudaStatus(cudaMemcpy(dst, src, bytes, k), "cudaMemcpy", bytes);
  return CudaStatus(cudaMemcpyAsync(dst, src, bytes, k, static_cast<cudaStream_t>(stream)),
                    "cudaMemcpyAsync", bytes);
}

Status GpuMemset(void* dst, int value, size_t bytes, void* stream) {
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)),
                    "cudaMemsetAsync", bytes);
}

Status GpuSync(void* stream) {
  return CudaStatus(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                    "cudaStreamSynchronize", 0);
}

Status GpuSetDevice(int device) { return CudaStatus(cudaSetDevice(device), "cudaSetDevice", 0); }

}  // namespace strata::kernels::detail
