// Reads that race with writers by design, told to the thread sanitizer.
//
// An optimistic reader (base::SeqSharedMutex's count checked around its
// reads) reads memory a writer may be changing and throws away what it read
// when the count moved. Those reads are data races the design accounts
// for; between STRATA_IGNORE_READS_BEGIN() and STRATA_IGNORE_READS_END() the
// sanitizer does not record the calling thread's memory accesses (the
// runtime ignores its writes too, not only its reads); its locks and every
// other thread's accesses are checked as usual. Outside a sanitizer build
// both are nothing.
//
// Thread safety: per thread; pairs nest.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define STRATA_THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRATA_THREAD_SANITIZER 1
#endif
#endif

#if defined(STRATA_THREAD_SANITIZER)
// The sanitizer's runtime (dynamic annotations).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#define STRATA_IGNORE_READS_BEGIN() AnnotateIgnoreReadsBegin(__FILE__, __LINE__)
#define STRATA_IGNORE_READS_END() AnnotateIgnoreReadsEnd(__FILE__, __LINE__)
#else
#define STRATA_IGNORE_READS_BEGIN() ((void)0)
#define STRATA_IGNORE_READS_END() ((void)0)
#endif
