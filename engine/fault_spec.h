// FaultSpec: the fault injection a Store (or a replay) asks for, parsed from
// StoreOptions::faults, e.g. "eio=0.01,enospc=0.001,delay_us=200,seed=7":
// probabilities per SSD-tier I/O of an EIO (reads and writes) or an ENOSPC
// (writes), and a delay added to every such I/O. Empty: no injection and no
// cost.
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>

#include "strata/status.h"

namespace strata::engine {

struct FaultSpec {
  double eio_probability = 0.0;
  double enospc_probability = 0.0;
  uint64_t delay_us = 0;
  uint64_t seed = 1;

  bool active() const {
    return eio_probability > 0 || enospc_probability > 0 || delay_us > 0;
  }
};

// Parses "key=value" pairs separated by commas. Unknown keys, bad numbers and
// probabilities outside [0, 1] are InvalidArgument naming the pair.
Result<FaultSpec> ParseFaultSpec(const std::string& text);

}  // namespace strata::engine
