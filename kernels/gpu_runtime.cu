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
