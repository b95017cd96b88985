#include "bench/row_staging.h"

#include <string>

#if defined(STRATA_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "base/cuda_status.h"
#endif

namespace strata::bench {

RowStaging::~RowStaging() {
#if defined(STRATA_HAVE_CUDA)
  if (device_ != nullptr) (void)cudaFree(device_);
#endif
}

Status RowStaging::Check() const {
#if defined(STRATA_HAVE_CUDA)
  return Status::Ok();
#else
  if (!on_device_) return Status::Ok();
  return Status::FailedPrecondition(
      "the store keeps T0 on a GPU, but this build has no CUDA runtime to stage rows "
      "through device memory; rebuild with CUDA or run with --no-gpu");
#endif
}

Result<float*> RowStaging::Device(size_t floats) {
#if defined(STRATA_HAVE_CUDA)
  if (floats > device_floats_) {
    if (device_ != nullptr) {
      STRATA_RETURN_IF_ERROR(base::CudaStatus(cudaFree(device_), "row staging: cudaFree"));
    }
    device_ = nullptr;
    device_floats_ = 0;
    void* ptr = nullptr;
    STRATA_RETURN_IF_ERROR(
        base::CudaStatus(cudaMalloc(&ptr, floats * sizeof(float)), "row staging: cudaMalloc"));
    device_ = static_cast<float*>(ptr);
    device_floats_ = floats;
  }
  return device_;
#else
  (void)floats;
  return Check();
#endif
}

Result<float*> RowStaging::PullTarget(float* host, size_t floats) {
  if (!on_device_) return host;
  return Device(floats);
}

Status RowStaging::FinishPull(float* host, size_t floats) {
  if (!on_device_ || floats == 0) return Status::Ok();
#if defined(STRATA_HAVE_CUDA)
  return base::CudaStatus(cudaMemcpy(host, device_, floats * sizeof(float), cudaMemcpyDeviceToHost),
                          "row staging: cudaMemcpy device to host");
#else
  (void)host;
  return Check();
#endif
}

Result<const float*> RowStaging::PushSource(const float* host, size_t floats) {
  if (!on_device_) return host;
  STRATA_ASSIGN_OR_RETURN(float* device, Device(floats));
#if defined(STRATA_HAVE_CUDA)
  if (floats > 0) {
    STRATA_RETURN_IF_ERROR(
        base::CudaStatus(cudaMemcpy(device, host, floats * sizeof(float), cudaMemcpyHostToDevice),
                         "row staging: cudaMemcpy host to device"));
  }
#endif
  return static_cast<const float*>(device);
}

}  // namespace strata::bench
