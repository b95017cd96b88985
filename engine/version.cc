#include "strata/version.h"

#include "kernels/gpu_runtime.h"

namespace strata {

const char* Version() { return STRATA_VERSION_STRING; }

int VisibleGpuCount() { return kernels::VisibleGpuCount(); }

std::string BuildInfo() {
  std::string out = "strata ";
  out += Version();
  out += kernels::CudaBuildInfo();
  return out;
}

}  // namespace strata
