// Moving rows between the host and the runner's memory (device memory when
// T0 runs on a GPU, host memory for the host runner): the per-table staging
// buffers the engine reuses, and the one copy of exported T0 rows back to the
// host that eviction, checkpoint and scan share.
//
// Thread safety: none inside; a table's RunnerStaging and PassScratch are
// guarded by its table's mutex (engine/store_impl.h), a HostRows belongs to its caller.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/key_dedup.h"
#include "kernels/device_table.h"
#include "strata/status.h"
#include "strata/types.h"

namespace strata::engine {

// Staging buffers of one table in runner memory, grown on demand and reused.
struct RunnerStaging {
  kernels::RunnerBuffer<Key> keys;
  kernels::RunnerBuffer<float> rows;
  kernels::RunnerBuffer<float> values;
  kernels::RunnerBuffer<uint8_t> flags;
  kernels::RunnerBuffer<int64_t> next_use;
  kernels::RunnerBuffer<uint8_t> dirty;
  kernels::RunnerBuffer<uint32_t> out_rows;  // a Pull's second pass: rows of `out`
};

// Host scratch of a DeviceTier's passes, kept from call to call so the data
// path allocates nothing once it has grown.
struct PassScratch {
  std::vector<uint8_t> found;       // kGpu: the pass's found flags, copied out
  std::vector<Key> miss_keys;       // keys T0 lacked, repeats included
  std::vector<uint32_t> miss_rows;  // their positions in the batch
  std::vector<int64_t> miss_next_use;
  std::vector<Key> miss_unique;  // their distinct keys
  KeyDedup dedup;
  // The next use of every missing key when miss_next_use is empty.
  int64_t next_use_all = kClockNever;
};

// Grows `buffer` to at least `count` elements (doubling), keeping none of its
// contents: staging only.
template <class T>
[[nodiscard]] Status ReserveRunner(kernels::RunnerBuffer<T>& buffer, kernels::Runner runner,
                                   size_t count) {
  if (buffer.size() >= count && buffer.runner() == runner && buffer.data() != nullptr) {
    return Status::Ok();
  }
  return buffer.Allocate(runner, std::max<size_t>(count, buffer.size() * 2));
}

// Rows exported from T0 (a kernels::RowBatch), copied to the host: row i is
// rows[i * row_floats, (i + 1) * row_floats).
struct HostRows {
  std::vector<Key> keys;
  std::vector<float> rows;
  std::vector<int64_t> next_use;
  std::vector<uint8_t> dirty;
};

// Copies every field of `batch` (runner memory, `batch.count` rows of
// `row_floats` floats) into `out`, resizing its vectors (their capacity is
// reused from call to call).
[[nodiscard]] Status CopyRowsToHost(kernels::Runner runner, const kernels::RowBatch& batch,
                                    uint32_t row_floats, HostRows* out);

}  // namespace strata::engine
