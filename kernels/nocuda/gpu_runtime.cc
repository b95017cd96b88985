// Host-only build (no nvcc): there is never a GPU to use.
#include "kernels/gpu_runtime.h"

namespace strata::kernels {

int VisibleGpuCount() { return 0; }

std::string CudaBuildInfo() { return ", built without CUDA (host runner only)"; }

}  // namespace strata::kernels

namespace strata::kernels::detail {
namespace {
Status NoCuda(const char* what) {
  return Status::FailedPrecondition(std::string(what) + ": built without CUDA (host runner only)");
}
}  // namespace

Status GpuAllocate(size_t, void** out) {
  *out = nullptr;
  return NoCuda("GpuAllocate");
}
void GpuFree(void*) {}
Status GpuHostAllocate(size_t, void** out) {
  *out = nullptr;
  return NoCuda("GpuHostAllocate");
}
void GpuHostFree(void*) {}
Status GpuCopy(void*, const void*, size_t, GpuCopyKind, void*) { return NoCuda("GpuCopy"); }
Status GpuMemset(void*, int, size_t, void*) { return NoCuda("GpuMemset"); }
Status GpuSync(void*) { return NoCuda("GpuSync"); }
Status GpuSetDevice(int) { return NoCuda("GpuSetDevice"); }
bool GpuIsDeviceMemory(const void*) { return false; }

}  // namespace strata::kernels::detail
