// Host-only build (no nvcc): there is never a GPU to use.
#include "kernels/gpu_runtime.h"

namespace strata::kernels {

int VisibleGpuCount() { return 0; }

std::string CudaBuildInfo() { return ", built without CUDA (host runner only)"; }

}  // namespace strata::kernels
