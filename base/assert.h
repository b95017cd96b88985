// STRATA_ASSERT: checks for programmer errors, on in every build type.
//
// A failed assertion prints the condition, file, line and message to stderr
// and aborts. Use it for what must never happen (broken invariants, misuse of
// an API contract marked REQUIRES:); use Status for what can happen (bad
// input, I/O errors).
#pragma once

#include "strata/status.h"  // strata::detail::AssertFail

#define STRATA_ASSERT(cond, msg)                                      \
  do {                                                                \
    if (!(cond)) [[unlikely]] {                                       \
      ::strata::detail::AssertFail(#cond, __FILE__, __LINE__, (msg)); \
    }                                                                 \
  } while (0)
