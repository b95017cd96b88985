// Library version and build facts, for `strata --version` and for pipelines
// that log what they run against. Thread-safe; no ownership concerns.
#pragma once

#include <string>

namespace strata {

// "0.1.0".
const char* Version();

// Number of CUDA devices visible to this process; 0 without a GPU, without a
// driver, or in a build without CUDA. The store takes the GPU path only when
// this is positive; otherwise the host runner.
int VisibleGpuCount();

// One line describing the build: version, CUDA on/off and architectures.
std::string BuildInfo();

}  // namespace strata
