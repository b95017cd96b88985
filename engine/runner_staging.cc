#include "engine/runner_staging.h"

namespace strata::engine {

Status CopyRowsToHost(kernels::Runner runner, const kernels::RowBatch& batch, uint32_t row_floats,
                      HostRows* out) {
  const uint64_t n = batch.count;
  out->keys.resize(n);
  out->rows.resize(n * row_floats);
  out->next_use.resize(n);
  out->dirty.resize(n);
  if (n == 0) return Status::Ok();
  STRATA_RETURN_IF_ERROR(
      kernels::RunnerCopyOut(runner, out->keys.data(), batch.keys, n * sizeof(Key)));
  STRATA_RETURN_IF_ERROR(kernels::RunnerCopyOut(runner, out->rows.data(), batch.rows,
                                                out->rows.size() * sizeof(float)));
  STRATA_RETURN_IF_ERROR(
      kernels::RunnerCopyOut(runner, out->next_use.data(), batch.next_use, n * sizeof(int64_t)));
  return kernels::RunnerCopyOut(runner, out->dirty.data(), batch.dirty, n);
}

}  // namespace strata::engine
