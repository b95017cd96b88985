// The CUDA row moves of row_ops.h: one thread per output float.
#include <cuda_runtime.h>

#include "base/cuda_status.h"
#include "kernels/row_ops.h"

namespace strata::kernels::detail {
namespace {

constexpr unsigned kThreads = 256;

__global__ void GatherRowsKernel(const float* rows, const uint32_t* slots, uint64_t n, uint32_t dim,
                                 float* out) {
  const uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= n * dim) return;
  const uint64_t row = i / dim;
  out[i] = rows[uint64_t{slots[row]} * dim + i % dim];
}

__global__ void SumRowGroupsKernel(const float* rows, const uint32_t* order, const uint32_t* starts,
                                   uint64_t groups, uint32_t dim, float* sums) {
  const uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (i >= groups * dim) return;
  const uint64_t group = i / dim;
  const uint32_t d = static_cast<uint32_t>(i % dim);
  float sum = 0.0f;
  for (uint32_t j = starts[group]; j < starts[group + 1]; ++j) {
    sum += rows[uint64_t{order[j]} * dim + d];
  }
  sums[i] = sum;
}

unsigned Blocks(uint64_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

}  // namespace

Status GpuGatherRows(const float* rows, const uint32_t* slots, size_t n, uint32_t dim, float* out,
                     void* stream) {
  if (n == 0 || dim == 0) return Status::Ok();
  GatherRowsKernel<<<Blocks(uint64_t{n} * dim), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      rows, slots, n, dim, out);
  return base::CudaLaunchStatus("GatherRowsKernel");
}

Status GpuSumRowGroups(const float* rows, const uint32_t* order, const uint32_t* starts,
                       size_t groups, uint32_t dim, float* sums, void* stream) {
  if (groups == 0 || dim == 0) return Status::Ok();
  SumRowGroupsKernel<<<Blocks(uint64_t{groups} * dim), kThreads, 0,
                       static_cast<cudaStream_t>(stream)>>>(rows, order, starts, groups, dim, sums);
  return base::CudaLaunchStatus("SumRowGroupsKernel");
}

}  // namespace strata::kernels::detail
