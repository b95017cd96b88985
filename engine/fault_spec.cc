#include "engine/fault_spec.h"

#include <cerrno>
#include <cstdlib>

namespace strata::engine {
namespace {

Status Bad(const std::string& pair, const std::string& why) {
  return Status::InvalidArgument("faults: '" + pair + "': " + why +
                                 " (expected eio=P,enospc=P,delay_us=N,seed=N)");
}

}  // namespace

Result<FaultSpec> ParseFaultSpec(const std::string& text) {
  FaultSpec spec;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string pair = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    if (eq == std::string::npos) return Bad(pair, "no '='");
    std::string key = pair.substr(0, eq), value = pair.substr(eq + 1);
    if (value.empty()) return Bad(pair, "no value");
    char* end = nullptr;
    errno = 0;
    if (key == "eio" || key == "enospc") {
      double p = std::strtod(value.c_str(), &end);
      if (errno != 0 || *end != '\0' || !(p >= 0.0 && p <= 1.0)) {
        return Bad(pair, "a probability in [0, 1]");
      }
      (key == "eio" ? spec.eio_probability : spec.enospc_probability) = p;
    } else if (key == "delay_us" || key == "seed") {
      if (value[0] == '-') return Bad(pair, "a non-negative integer");
      unsigned long long n = std::strtoull(value.c_str(), &end, 10);
      if (errno != 0 || *end != '\0') return Bad(pair, "a non-negative integer");
      (key == "delay_us" ? spec.delay_us : spec.seed) = n;
    } else {
      return Bad(pair, "unknown key '" + key + "'");
    }
  }
  return spec;
}

}  // namespace strata::engine
