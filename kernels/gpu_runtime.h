// Run-time GPU discovery for the kernels module. The CUDA build answers from
// the driver (cudaGetDeviceCount); the host-only build answers 0. Callers take
// the GPU path only when VisibleGpuCount() > 0. Thread-safe.
#pragma once

#include <string>

namespace strata::kernels {

// Visible CUDA devices; 0 when there is no GPU or no driver (never an error).
int VisibleGpuCount();

// ", CUDA sm_90" or ", host runner only".
std::string CudaBuildInfo();

}  // namespace strata::kernels
