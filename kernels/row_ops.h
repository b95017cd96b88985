// Row moves on the GPU for the cluster's NCCL exchange (cluster_device.cc):
// scatter rows that came back per distinct key into the caller's order, and
// sum the gradients of one key in a fixed order, so the result does not
// depend on thread scheduling. Device memory, stream-ordered (stream: a
// cudaStream_t, nullptr the default stream); the host-only build answers
// FailedPrecondition.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/status.h"

namespace strata::kernels::detail {

// out[i] = rows[slots[i]] for i < n, rows of `dim` floats.
[[nodiscard]] Status GpuGatherRows(const float* rows, const uint32_t* slots, size_t n, uint32_t dim,
                                   float* out, void* stream);
// sums[g] = rows[order[starts[g]]] + rows[order[starts[g] + 1]] + ... up to
// order[starts[g + 1] - 1], added left to right, for g < groups (starts has
// groups + 1 entries).
[[nodiscard]] Status GpuSumRowGroups(const float* rows, const uint32_t* order,
                                     const uint32_t* starts, size_t groups, uint32_t dim,
                                     float* sums, void* stream);

}  // namespace strata::kernels::detail
