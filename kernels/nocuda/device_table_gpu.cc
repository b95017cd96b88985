// Host-only build: DeviceTable's GPU back end is absent. Create refuses
// Runner::kGpu (no visible GPU), so these are reached only through misuse.
#include "kernels/device_table.h"

namespace strata::kernels {
namespace {
Status NoGpu() {
  return Status::FailedPrecondition("DeviceTable: built without CUDA (host runner only)");
}
}  // namespace

Status DeviceTable::GpuInit() { return NoGpu(); }
void DeviceTable::GpuRelease() {}
Status DeviceTable::GpuFind(const Key*, uint64_t, float*, uint32_t, uint8_t*, void*) {
  return NoGpu();
}
Status DeviceTable::GpuFindTouch(const TouchBatch&, uint64_t*, void*) { return NoGpu(); }
Status DeviceTable::GpuFindOrInsert(const Key*, uint64_t, float*, uint8_t*, int64_t, void*) {
  return NoGpu();
}
Status DeviceTable::GpuInsertOrAssign(const Key*, uint64_t, const float*, const int64_t*,
                                      const uint8_t*, void*) {
  return NoGpu();
}
Status DeviceTable::GpuForEachFound(const Key*, uint64_t, int, const int64_t*, uint8_t*, void*) {
  return NoGpu();
}
Status DeviceTable::GpuPush(const Key*, uint64_t, const float*, void*) { return NoGpu(); }
Status DeviceTable::GpuFindNonFinite(const float*, uint64_t, uint64_t*, uint64_t*, void*) {
  return NoGpu();
}
Status DeviceTable::GpuEvict(uint64_t, RowBatch*) { return NoGpu(); }
Status DeviceTable::GpuLargestNextUses(uint64_t, int64_t*, uint64_t*) { return NoGpu(); }
Status DeviceTable::GpuSelect(uint64_t, uint64_t*, uint64_t*, uint64_t*) { return NoGpu(); }
Status DeviceTable::GpuExportAll(const std::function<Status(const RowBatch&)>&) { return NoGpu(); }
Status DeviceTable::GpuSynchronize(void*) { return NoGpu(); }
uint64_t DeviceTable::GpuSize() const { return 0; }

}  // namespace strata::kernels
