// Small helpers shared by the commands of the CLI (trace, replay, bench,
// train): reporting a failed Status, parsing comma-separated option values,
// and adding numeric options that are checked while the command line is
// parsed.
//
// Numbers: CLI11 2.1 reads an unsigned option with strtoull, so "-1" becomes
// 2^64-1 and "010" is octal. Every unsigned option is therefore added with
// AddUnsigned (decimal digits only, within [min, max]) and every floating
// point option with AddReal (a finite number within a range); main checks at
// start-up that no unsigned or floating point option was added otherwise
// (CheckNumberOptions). A bad value is a usage error raised by the parser,
// before the command's callback runs: main prints one line naming the
// command and the option, and exits with code 2. Upper bounds are what a
// value may be multiplied by or cast to without overflow, or a named limit.
//
// Thread safety: functions; called while commands are added, parsed or run
// (one thread).
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "cli/command.h"
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

// Parses "1.1" or "1.1,1.2,..." into doubles.
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

// The longest measured run of a benchmark (--seconds), in seconds.
inline constexpr double kBenchSecondsMax = 24 * 3600;

// Name of the validators AddUnsigned and AddReal attach (CheckNumberOptions
// looks for it).
inline constexpr const char* kNumberCheck = "strata-number";

// Replaces `text` by its canonical decimal form when it is an integer in
// [min, max]; otherwise returns the one-line reason.
inline std::string CheckUnsigned(std::string& text, uint64_t min, uint64_t max) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
  const auto parsed = std::from_chars(text.data(), end, v);
  if (!digits || parsed.ptr != end || parsed.ec != std::errc()) {
    return "'" + text + "' is not a non-negative integer" + (digits ? " below 2^64" : "");
  }
  if (v < min || v > max) {
    return "'" + text + "' is not in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  }
  text = std::to_string(v);  // no leading zeros: CLI11 would read them as octal
  return "";
}

// Parses "1" or "1,2,..." into integers in [min, max] (CheckUnsigned).
inline Result<std::vector<uint64_t>> ParseUints(const std::string& text, const char* option,
                                                uint64_t min = 0, uint64_t max = UINT64_MAX) {
  STRATA_ASSIGN_OR_RETURN(auto items, SplitList(text, option));
  std::vector<uint64_t> out;
  for (auto& item : items) {
    if (std::string why = CheckUnsigned(item, min, max); !why.empty()) {
      return Status::InvalidArgument(std::string(option) + ": " + why);
    }
    out.push_back(std::stoull(item));
  }
  return out;
}

// Adds an unsigned option taking decimal integers in [min, max] only.
template <std::unsigned_integral T>
CLI::Option* AddUnsigned(CLI::App* command, const std::string& name, T& value,
                         const std::string& help, T min = 0,
                         T max = std::numeric_limits<T>::max()) {
  const bool bounded = min != 0 || max != std::numeric_limits<T>::max();
  const std::string range =
      bounded ? "in [" + std::to_string(min) + ", " + std::to_string(max) + "]" : "";
  return command->add_option(name, value, help)
      ->transform(
          CLI::Validator([min, max](std::string& text) { return CheckUnsigned(text, min, max); },
                         range, kNumberCheck));
}

// Replaces `value`, "1" or "1,2,...", by the canonical form of its items
// when `check` (CheckUnsigned or CheckReal bound to a range) accepts every
// one; otherwise returns the one-line reason, naming the item.
template <typename CheckItem>
std::string CheckList(std::string& value, const CheckItem& check) {
  auto items = SplitList(value, "list");
  if (!items.ok()) return "empty item in '" + value + "'";
  std::string canonical;
  for (std::string& item : *items) {
    if (std::string why = check(item); !why.empty()) {
      return items->size() == 1 ? why : why + " (in '" + value + "')";
    }
    canonical += (canonical.empty() ? "" : ",") + item;
  }
  value = canonical;
  return "";
}

// CheckList of decimal integers in [min, max] (CheckUnsigned).
inline std::string CheckUnsignedList(std::string& value, uint64_t min, uint64_t max) {
  return CheckList(value, [min, max](std::string& item) { return CheckUnsigned(item, min, max); });
}

// Adds an option taking "1" or "1,2,..." of decimal integers in [min, max]
// (each checked as by AddUnsigned: a bad item is a usage error naming it);
// read the text with ParseUints.
inline CLI::Option* AddUnsignedList(CLI::App* command, const std::string& name, std::string& text,
                                    const std::string& help, uint64_t min, uint64_t max) {
  const std::string range = "list in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return command->add_option(name, text, help)
      ->transform(CLI::Validator(
          [min, max](std::string& value) { return CheckUnsignedList(value, min, max); }, range));
}

// Adds an option taking one of the words `choices` only: any other value is
// a usage error naming the option and the value, raised by the parser.
inline CLI::Option* AddChoice(CLI::App* command, const std::string& name, std::string& value,
                              const std::string& help, const std::vector<std::string>& choices) {
  std::string list;
  for (const std::string& c : choices) list += (list.empty() ? "" : ", ") + c;
  return command->add_option(name, value, help)
      ->transform(CLI::Validator(
          [choices, list](std::string& text) -> std::string {
            for (const std::string& c : choices) {
              if (text == c) return "";
            }
            return "'" + text + "' is not one of " + list;
          },
          list));
}

// A closed or half-open interval of doubles.
struct RealRange {
  double min = 0;
  double max = 0;
  bool min_open = false;
  bool max_open = false;

  std::string ToString() const {
    char text[64];
    std::snprintf(text, sizeof(text), "%s%g, %g%s", min_open ? "(" : "[", min, max,
                  max_open ? ")" : "]");
    return text;
  }
  bool Contains(double v) const {
    return (min_open ? v > min : v >= min) && (max_open ? v < max : v <= max);
  }
};

// Replaces `text` by a round-trip decimal form when it is a finite number in
// `range`; otherwise returns the one-line reason.
inline std::string CheckReal(std::string& text, const RealRange& range) {
  double v = 0;
  const char* end = text.data() + text.size();
  const auto parsed = std::from_chars(text.data(), end, v);
  if (text.empty() || parsed.ptr != end || parsed.ec != std::errc() || !std::isfinite(v)) {
    return "'" + text + "' is not a finite number";
  }
  if (!range.Contains(v)) return "'" + text + "' is not in " + range.ToString();
  char canonical[32];
  std::snprintf(canonical, sizeof(canonical), "%.17g", v);
  text = canonical;
  return "";
}

// Adds a floating point option taking finite numbers in `range` only.
template <std::floating_point T>
CLI::Option* AddReal(CLI::App* command, const std::string& name, T& value, const std::string& help,
                     RealRange range) {
  return command->add_option(name, value, help)
      ->transform(CLI::Validator([range](std::string& text) { return CheckReal(text, range); },
                                 "in " + range.ToString(), kNumberCheck));
}

// CheckList of finite numbers in `range` (CheckReal).
inline std::string CheckRealList(std::string& value, const RealRange& range) {
  return CheckList(value, [&range](std::string& item) { return CheckReal(item, range); });
}

// Adds an option taking "1.5" or "1.5,2,..." of finite numbers in `range`
// (each checked as by AddReal: a bad item is a usage error naming it); read
// the text with ParseDoubles.
inline CLI::Option* AddRealList(CLI::App* command, const std::string& name, std::string& text,
                                const std::string& help, RealRange range) {
  return command->add_option(name, text, help)
      ->transform(
          CLI::Validator([range](std::string& value) { return CheckRealList(value, range); },
                         "list in " + range.ToString()));
}

// InvalidArgument naming an unsigned or floating point option under `app`
// that was not added with AddUnsigned or AddReal (a programming error main
// reports at start-up, so any test that runs the CLI catches it). Signed
// options need no check: CLI11 refuses values outside their type.
inline Status CheckNumberOptions(CLI::App& app, const std::string& path) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    const bool number = type.rfind("UINT", 0) == 0 || type.rfind("FLOAT", 0) == 0;
    if (!number) continue;
    try {
      option->get_validator(kNumberCheck);
    } catch (const CLI::OptionNotFound&) {
      return Status::InvalidArgument(path + " " + option->get_name() +
                                     ": a numeric option not added with AddUnsigned or AddReal "
                                     "(cli/cli_util.h)");
    }
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    STRATA_RETURN_IF_ERROR(CheckNumberOptions(*sub, path + " " + sub->get_name()));
  }
  return Status::Ok();
}

}  // namespace strata::cli
