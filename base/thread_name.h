// NameThread: names a thread, so that top -H, perf, gdb and
// /proc/PID/task/TID/comm tell the project's threads apart ("strata-io0",
// "strata-plan", ...). Name a new thread from the thread that started it
// (its std::thread's native_handle()), so the name is there when the
// starter goes on. Linux keeps at most 15 bytes of a name: longer names are
// cut there. Best effort: a failure leaves the thread's old name and
// changes nothing else.
//
// Thread safety: any thread may name any thread of the process.
#pragma once

#include <pthread.h>

#include <string>

namespace strata::base {

// The longest name Linux keeps (its 16-byte buffer less the terminator).
inline constexpr size_t kThreadNameBytesMax = 15;

inline void NameThread(pthread_t thread, const std::string& name) {
  const std::string cut = name.substr(0, kThreadNameBytesMax);
  (void)pthread_setname_np(thread, cut.c_str());
}

}  // namespace strata::base
