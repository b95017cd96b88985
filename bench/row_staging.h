// RowStaging: where Pull writes and Push reads, for the harness's callers of
// the Store (`strata replay`, `strata train`). On the host runner
// (Stats().t0_on_gpu false) the store reads and writes host memory, so the
// caller's own host vectors are used directly. When T0 is a GPU the store
// takes device pointers: rows are pulled into a device buffer and copied to
// the host, where the model's math runs; gradients are copied to a device
// buffer before Push. The copies use the CUDA runtime directly (as any
// pipeline on a GPU would); a build without CUDA cannot meet a GPU store and
// says so.
//
// Thread safety: none; one per worker thread. Owns its device buffers.
#pragma once

#include <cstddef>

#include "strata/status.h"

namespace strata::bench {

class RowStaging {
 public:
  explicit RowStaging(bool on_device) : on_device_(on_device) {}
  ~RowStaging();
  RowStaging(const RowStaging&) = delete;
  RowStaging& operator=(const RowStaging&) = delete;

  // Fails when the store is on a GPU and this build has no CUDA runtime.
  [[nodiscard]] Status Check() const;

  // The pointer to give Pull for `floats` floats that should end in `host`.
  Result<float*> PullTarget(float* host, size_t floats);
  // After the Pull: brings the rows to `host` (no-op on the host runner).
  [[nodiscard]] Status FinishPull(float* host, size_t floats);
  // The pointer to give Push for gradients `host` of `floats` floats.
  Result<const float*> PushSource(const float* host, size_t floats);

  bool on_device() const { return on_device_; }

 private:
  Result<float*> Device(size_t floats);

  const bool on_device_;
  float* device_ = nullptr;  // cudaMalloc'ed, device_floats_ long
  size_t device_floats_ = 0;
};

}  // namespace strata::bench
