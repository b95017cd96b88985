#include <cuda_runtime.h>

#include "base/cuda_status.h"
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

// A runtime call's error, naming the call and the bytes it moved.
Status CallStatus(cudaError_t err, const char* what, size_t bytes) {
  if (err == cudaSuccess) return Status::Ok();
  return base::CudaStatus(err, std::string(what) + " (" + std::to_string(bytes) + " bytes)");
}

}  // namespace

Status GpuAllocate(size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  return CallStatus(cudaMalloc(out, bytes), "cudaMalloc", bytes);
}

void GpuFree(void* ptr) {
  if (ptr != nullptr) (void)cudaFree(ptr);
}

Status GpuHostAllocate(size_t bytes, void** out) {
  *out = nullptr;
  if (bytes == 0) return Status::Ok();
  return CallStatus(cudaMallocHost(out, bytes), "cudaMallocHost", bytes);
}

void GpuHostFree(void* ptr) {
  if (ptr != nullptr) (void)cudaFreeHost(ptr);
}

Status GpuCopy(void* dst, const void* src, size_t bytes, GpuCopyKind kind, void* stream) {
  if (bytes == 0) return Status::Ok();
  const cudaMemcpyKind k = kind == GpuCopyKind::kHostToDevice   ? cudaMemcpyHostToDevice
                           : kind == GpuCopyKind::kDeviceToHost ? cudaMemcpyDeviceToHost
                                                                : cudaMemcpyDeviceToDevice;
  if (stream == nullptr) return CallStatus(cudaMemcpy(dst, src, bytes, k), "cudaMemcpy", bytes);
  return CallStatus(cudaMemcpyAsync(dst, src, bytes, k, static_cast<cudaStream_t>(stream)),
                    "cudaMemcpyAsync", bytes);
}

Status GpuMemset(void* dst, int value, size_t bytes, void* stream) {
  if (bytes == 0) return Status::Ok();
  return CallStatus(cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(stream)),
                    "cudaMemsetAsync", bytes);
}

Status GpuSync(void* stream) {
  return CallStatus(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)),
                    "cudaStreamSynchronize", 0);
}

Status GpuSetDevice(int device) { return CallStatus(cudaSetDevice(device), "cudaSetDevice", 0); }

bool GpuIsDeviceMemory(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // a pointer CUDA does not know is host memory
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice;
}

}  // namespace strata::kernels::detail
