// CUDA runtime errors as Status: the one conversion, used by the kernels
// module (runtime calls and kernel launches) and by the training example's
// staging copies. Include it only from sources built with the CUDA toolkit
// (STRATA_HAVE_CUDA); it needs <cuda_runtime_api.h>.
//
// Thread safety: CUDA's error state is per host thread; CudaStatus reads and
// clears only the calling thread's.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>
#include <utility>

#include "strata/status.h"

namespace strata::base {

// OK for cudaSuccess. Otherwise "what: cudaErrorName: description",
// ResourceExhausted when the device ran out of memory, else Internal; the
// thread's last error is cleared so that it does not resurface at the next
// launch check.
inline Status CudaStatus(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  std::string msg(what);
  msg += ": ";
  msg += cudaGetErrorName(err);
  msg += ": ";
  msg += cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return Status::ResourceExhausted(std::move(msg));
  return Status::Internal(std::move(msg));
}

// The error of the latest kernel launch on this thread, as CudaStatus.
inline Status CudaLaunchStatus(std::string_view what) {
  return CudaStatus(cudaGetLastError(), what);
}

}  // namespace strata::base
