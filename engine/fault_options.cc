// FaultOptions: their command-line spelling, their check at Open, and the
// FaultEnv that injects them.
#include "engine/fault_options.h"

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace strata {
namespace {

Status BadPair(std::string_view pair, const std::string& why) {
  return Status::InvalidArgument("faults: '" + std::string(pair) + "': " + why +
                                 " (expected eio=P,enospc=P,delay_us=N,seed=N)");
}

// A probability in [0, 1] (NaN refused).
bool ValidProbability(double p) { return p >= 0.0 && p <= 1.0; }

Status ParseProbability(std::string_view pair, std::string_view value, double* out) {
  // strtod needs a terminated string; std::from_chars for double is not in
  // every standard library this builds with.
  const std::string text(value);
  char* end = nullptr;
  errno = 0;
  const double p = std::strtod(text.c_str(), &end);
  if (errno != 0 || end != text.c_str() + text.size() || !ValidProbability(p)) {
    return BadPair(pair, "a probability in [0, 1]");
  }
  *out = p;
  return Status::Ok();
}

Status ParseCount(std::string_view pair, std::string_view value, uint64_t max, uint64_t* out) {
  uint64_t n = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (error != std::errc() || end != value.data() + value.size() || n > max) {
    return BadPair(pair, "an integer in [0, " + std::to_string(max) + "]");
  }
  *out = n;
  return Status::Ok();
}

}  // namespace

Result<FaultOptions> ParseFaultOptions(std::string_view text) {
  FaultOptions faults;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view pair = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return BadPair(pair, "no '='");
    const std::string_view key = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (value.empty()) return BadPair(pair, "no value");
    if (key == "eio") {
      STRATA_RETURN_IF_ERROR(ParseProbability(pair, value, &faults.eio_probability));
    } else if (key == "enospc") {
      STRATA_RETURN_IF_ERROR(ParseProbability(pair, value, &faults.enospc_probability));
    } else if (key == "delay_us") {
      STRATA_RETURN_IF_ERROR(ParseCount(pair, value, kFaultDelayUsMax, &faults.delay_us));
    } else if (key == "seed") {
      STRATA_RETURN_IF_ERROR(ParseCount(pair, value, UINT64_MAX, &faults.seed));
    } else {
      return BadPair(pair, "unknown key '" + std::string(key) + "'");
    }
  }
  return faults;
}

namespace engine {

Status CheckFaultOptions(const FaultOptions& faults, const std::string& field) {
  auto probability = [&](const char* member, double p) {
    if (ValidProbability(p)) return Status::Ok();
    return Status::InvalidArgument(field + "." + member + " = " + std::to_string(p) +
                                   " must lie in [0, 1]");
  };
  STRATA_RETURN_IF_ERROR(probability("eio_probability", faults.eio_probability));
  STRATA_RETURN_IF_ERROR(probability("enospc_probability", faults.enospc_probability));
  if (faults.delay_us > kFaultDelayUsMax) {
    return Status::InvalidArgument(field + ".delay_us = " + std::to_string(faults.delay_us) +
                                   " is above " + std::to_string(kFaultDelayUsMax));
  }
  return Status::Ok();
}

Result<std::unique_ptr<io::FaultEnv>> MakeFaultEnv(const FaultOptions& faults, io::Env* base) {
  auto env = std::make_unique<io::FaultEnv>(base);
  env->SetSeed(faults.seed);
  for (io::FaultOp op : {io::FaultOp::kRead, io::FaultOp::kWrite}) {
    if (faults.eio_probability > 0) {
      STRATA_RETURN_IF_ERROR(
          env->AddRule({.op = op, .error_number = EIO, .probability = faults.eio_probability}));
    }
    if (faults.delay_us > 0) {
      STRATA_RETURN_IF_ERROR(
          env->AddRule({.op = op, .kind = io::FaultKind::kLatency, .latency_us = faults.delay_us}));
    }
  }
  if (faults.enospc_probability > 0) {
    STRATA_RETURN_IF_ERROR(env->AddRule({.op = io::FaultOp::kWrite,
                                         .error_number = ENOSPC,
                                         .probability = faults.enospc_probability}));
  }
  return env;
}

}  // namespace engine
}  // namespace strata
