// A small logger. Level from the environment variable STRATA_LOG
// (error, warn, info, debug; default warn), read once on first use.
//
// STRATA_LOG_INFO("opened %s with %zu tables", path, n);
//
// Thread safety: safe from any thread; each message is one write(2) to stderr.
// Header-only, so every module (io included) can log without linking anything.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata {

enum class LogLevel : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

namespace detail {
inline LogLevel ParseLogLevel(const char* text) {
  if (text == nullptr) return LogLevel::kWarn;
  if (std::strcmp(text, "error") == 0) return LogLevel::kError;
  if (std::strcmp(text, "info") == 0) return LogLevel::kInfo;
  if (std::strcmp(text, "debug") == 0) return LogLevel::kDebug;
  return LogLevel::kWarn;
}
inline std::atomic<int>& LogLevelCell() {
  static std::atomic<int> level{static_cast<int>(ParseLogLevel(std::getenv("STRATA_LOG")))};
  return level;
}
}  // namespace detail

// The active level (from STRATA_LOG unless overridden).
inline LogLevel CurrentLogLevel() {
  return static_cast<LogLevel>(detail::LogLevelCell().load(std::memory_order_relaxed));
}
// Overrides the level (tests, CLI --verbose).
inline void SetLogLevel(LogLevel level) {
  detail::LogLevelCell().store(static_cast<int>(level), std::memory_order_relaxed);
}
inline bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= detail::LogLevelCell().load(std::memory_order_relaxed);
}

__attribute__((format(printf, 4, 5))) inline void LogPrintf(LogLevel level, const char* file,
                                                            int line, const char* fmt, ...) {
  static constexpr const char* kNames[] = {"E", "W", "I", "D"};
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  char buf[1024];
  int n = std::snprintf(buf, sizeof(buf), "strata %s %s:%d] ", kNames[static_cast<int>(level)],
                        base, line);
  if (n < 0) return;
  va_list args;
  va_start(args, fmt);
  int m = std::vsnprintf(buf + n, sizeof(buf) - static_cast<size_t>(n) - 1, fmt, args);
  va_end(args);
  size_t len = static_cast<size_t>(n) + (m > 0 ? static_cast<size_t>(m) : 0);
  if (len > sizeof(buf) - 2) len = sizeof(buf) - 2;
  buf[len++] = '\n';
  ssize_t ignored = ::write(2, buf, len);
  (void)ignored;
}

}  // namespace strata

#define STRATA_LOG_AT_(level, ...)                                 \
  do {                                                             \
    if (::strata::LogEnabled(level)) {                             \
      ::strata::LogPrintf(level, __FILE__, __LINE__, __VA_ARGS__); \
    }                                                              \
  } while (0)
#define STRATA_LOG_ERROR(...) STRATA_LOG_AT_(::strata::LogLevel::kError, __VA_ARGS__)
#define STRATA_LOG_WARN(...) STRATA_LOG_AT_(::strata::LogLevel::kWarn, __VA_ARGS__)
#define STRATA_LOG_INFO(...) STRATA_LOG_AT_(::strata::LogLevel::kInfo, __VA_ARGS__)
#define STRATA_LOG_DEBUG(...) STRATA_LOG_AT_(::strata::LogLevel::kDebug, __VA_ARGS__)
