// The negative check of `make lint` (scripts/lint.sh): cases 1..4 each break
// a lock rule that base/mutex.h's annotations express, and clang with
// -Werror=thread-safety must refuse every one with a thread-safety error;
// case 0 keeps the rules and must compile (so a failure of 1..4 is the
// analysis, not a broken include). lint.sh compiles this file once per
// STRATA_LINT_CASE, so an analysis that silently stopped working (a macro
// defined away, a flag lost) turns make lint red instead of passing all.
#include "base/mutex.h"

namespace strata::lint_check {

class Counter {
 public:
#if STRATA_LINT_CASE == 0
  // Every rule kept.
  void Guarded() {
    base::MutexLock lock(&mu_);
    IncrementLocked();
  }
#elif STRATA_LINT_CASE == 1
  // Writes a guarded member without its mutex.
  void Unguarded() { value_ = 1; }
#elif STRATA_LINT_CASE == 2
  // Calls a REQUIRES(mu_) function without holding mu_.
  void CallsWithoutLock() { IncrementLocked(); }
#elif STRATA_LINT_CASE == 3
  // Reads a guarded member holding a different mutex.
  int WrongMutex() {
    base::MutexLock lock(&other_mu_);
    return value_;
  }
#elif STRATA_LINT_CASE == 4
  // Takes a mutex the function is annotated as excluding (already held by
  // its caller), a self-deadlock.
  void Reenters() EXCLUDES(mu_) {}
  void Outer() {
    base::MutexLock lock(&mu_);
    Reenters();
  }
#else
#error "STRATA_LINT_CASE must be 0..4"
#endif

 private:
  void IncrementLocked() REQUIRES(mu_) { ++value_; }

  base::Mutex mu_;
  base::Mutex other_mu_;
  int value_ GUARDED_BY(mu_) = 0;
};

}  // namespace strata::lint_check
