// Small helpers shared by the trace, replay and bench commands of the CLI:
// reporting a failed Status and parsing comma-separated option values.
//
// Thread safety: functions; called from a command's callback.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/command.h"
#include "strata/status.h"

namespace strata::cli {

// Prints "strata <command>: <status>" to stderr and sets the exit code to 1.
inline void ReportFailure(const char* command, const Status& status) {
  std::fprintf(stderr, "strata %s: %s\n", command, status.ToString().c_str());
  ExitCode() = 1;
}

// Splits "a,b,c" (empty items rejected).
inline Result<std::vector<std::string>> SplitList(const std::string& text, const char* option) {
  std::vector<std::string> items;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(',', start);
    items.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (items.back().empty()) {
      return Status::InvalidArgument(std::string(option) + ": empty item in '" + text + "'");
    }
    if (end == std::string::npos) return items;
    start = end + 1;
  }
}

// Parses "1.1" or "1.1,1.2,..." into doubles / unsigned integers.
inline Result<std::vector<double>> ParseDoubles(const std::string& text, const char* option) {
  STRATA_ASSIGN_OR_RETURN(auto items, SplitList(text, option));
  std::vector<double> out;
  for (const auto& item : items) {
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size()) {
      return Status::InvalidArgument(std::string(option) + ": '" + item + "' is not a number");
    }
    out.push_back(v);
  }
  return out;
}

inline Result<std::vector<uint64_t>> ParseUints(const std::string& text, const char* option) {
  STRATA_ASSIGN_OR_RETURN(auto items, SplitList(text, option));
  std::vector<uint64_t> out;
  for (const auto& item : items) {
    size_t used = 0;
    uint64_t v = 0;
    try {
      v = std::stoull(item, &used);
    } catch (...) {
      used = 0;
    }
    if (used != item.size() || item[0] == '-') {
      return Status::InvalidArgument(std::string(option) + ": '" + item +
                                     "' is not a non-negative integer");
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace strata::cli
