// Host-only build (no nvcc): the GPU row moves are not there.
#include "kernels/row_ops.h"

namespace strata::kernels::detail {

Status GpuGatherRows(const float*, const uint32_t*, size_t, uint32_t, float*, void*) {
  return Status::FailedPrecondition("GpuGatherRows: built without CUDA (host runner only)");
}

Status GpuSumRowGroups(const float*, const uint32_t*, const uint32_t*, size_t, uint32_t, float*,
                       void*) {
  return Status::FailedPrecondition("GpuSumRowGroups: built without CUDA (host runner only)");
}

}  // namespace strata::kernels::detail
