// The POSIX FileLock behind Env::Default()->LockFile: flock(LOCK_EX |
// LOCK_NB) on a descriptor of its own, so a second lock of the same file
// fails in this process as in another (flock locks belong to the open file
// description, not to the process as fcntl's do), and the kernel drops the
// lock when the holder dies. The holder writes "<pid>\n" into the file for
// the message a refused locker gets.
#pragma once

#include <memory>
#include <string>

#include "io/env.h"

namespace strata::io {

// See Env::LockFile.
[[nodiscard]] Result<std::unique_ptr<FileLock>> LockFilePosix(const std::string& path);

}  // namespace strata::io
