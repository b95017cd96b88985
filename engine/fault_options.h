// FaultOptions (strata/options.h) inside the engine: checked at Store::Open,
// then turned into the io::FaultEnv the SSD tier's files go through.
// ParseFaultOptions, their command-line spelling, is defined in
// fault_options.cc too.
//
// Thread safety: pure functions; the FaultEnv returned is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "io/fault_env.h"
#include "strata/options.h"
#include "strata/status.h"

namespace strata::engine {

// InvalidArgument naming `field` (e.g. "StoreOptions.faults") and the member
// out of range: a probability outside [0, 1], a delay above kFaultDelayUsMax.
[[nodiscard]] Status CheckFaultOptions(const FaultOptions& faults, const std::string& field);

// A FaultEnv over `base` injecting `faults` into every read and write of the
// files opened through it (EIO on both, ENOSPC on writes, the delay on both).
// REQUIRES: CheckFaultOptions(faults) is OK; base outlives the FaultEnv.
Result<std::unique_ptr<io::FaultEnv>> MakeFaultEnv(const FaultOptions& faults, io::Env* base);

}  // namespace strata::engine
