// Clang thread-safety annotations (-Wthread-safety), as in
// https://clang.llvm.org/docs/ThreadSafetyAnalysis.html. They state which
// mutex guards a field and which a function needs held, and clang checks every
// access at compile time (`make lint`); other compilers see nothing.
//
// Use them through base/mutex.h's Mutex, SharedMutex and scoped locks, not on
// std::mutex (whose libstdc++ declaration carries no capability).
#pragma once

#if defined(__clang__) && !defined(SWIG)
#define STRATA_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define STRATA_THREAD_ANNOTATION(x)
#endif

// On a class: it is a lock (a "capability") named `x` in diagnostics.
#define CAPABILITY(x) STRATA_THREAD_ANNOTATION(capability(x))
// On a class: an RAII object that holds a capability for its lifetime.
#define SCOPED_CAPABILITY STRATA_THREAD_ANNOTATION(scoped_lockable)
// On a field: read or written only with `x` held (shared suffices to read).
#define GUARDED_BY(x) STRATA_THREAD_ANNOTATION(guarded_by(x))
// On a pointer field: the pointee is guarded by `x`.
#define PT_GUARDED_BY(x) STRATA_THREAD_ANNOTATION(pt_guarded_by(x))
// On a mutex field: it is acquired after / before the named ones (by
// declaration, so `Table::mu` covers every table's; checked by
// -Wthread-safety-beta).
#define ACQUIRED_AFTER(...) STRATA_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) STRATA_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
// On a function: the caller holds the capabilities (exclusively / shared).
#define REQUIRES(...) STRATA_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) STRATA_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: it acquires / releases the capabilities (no argument: `this`).
#define ACQUIRE(...) STRATA_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) STRATA_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) STRATA_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) STRATA_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) STRATA_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) STRATA_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define TRY_ACQUIRE_SHARED(...) STRATA_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
// On a function: the caller must not hold the capabilities (it takes them).
#define EXCLUDES(...) STRATA_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: asserts at run time that the capability is held.
#define ASSERT_CAPABILITY(x) STRATA_THREAD_ANNOTATION(assert_capability(x))
// On a function: returns a reference to the capability `x`.
#define RETURN_CAPABILITY(x) STRATA_THREAD_ANNOTATION(lock_returned(x))
// On a function: the analysis skips its body. Say why on the line above.
#define NO_THREAD_SAFETY_ANALYSIS STRATA_THREAD_ANNOTATION(no_thread_safety_analysis)
