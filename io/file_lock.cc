#include "io/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace strata::io {
namespace {

// Tries of a lock whose file its holder deleted in the meantime.
constexpr int kLockAttemptsMax = 8;

class PosixFileLock final : public FileLock {
 public:
  PosixFileLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixFileLock() override {
    // Closing the only descriptor of the open file description releases it.
    ::close(fd_);
  }
  const std::string& path() const override { return path_; }

 private:
  const int fd_;
  const std::string path_;
};

// The pid a holder wrote into the file, or 0 when it holds none (an older
// holder, or one that died between its lock and its write).
long ReadHolderPid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return 0;
  char* end = nullptr;
  const long pid = std::strtol(buf, &end, 10);
  return end != buf && pid > 0 ? pid : 0;
}

Status WritePid(int fd, const std::string& path) {
  char buf[32];
  const int len = std::snprintf(buf, sizeof(buf), "%ld\n", static_cast<long>(::getpid()));
  if (::ftruncate(fd, 0) != 0) return Status::FromErrno(errno, "truncate of lock file " + path);
  if (::pwrite(fd, buf, static_cast<size_t>(len), 0) != len) {
    return Status::FromErrno(errno, "write of lock file " + path);
  }
  return Status::Ok();
}

// True when `fd` is still the file at `path`: a holder that deletes its lock
// file (a failed Open removing the directory it created) may release it to
// a locker that opened the file before the unlink; that locker must not
// count itself a holder.
Result<bool> StillAtPath(int fd, const std::string& path) {
  struct stat held, named;
  if (::fstat(fd, &held) != 0) return Status::FromErrno(errno, "fstat of lock file " + path);
  if (::stat(path.c_str(), &named) != 0) {
    if (errno == ENOENT) return false;
    return Status::FromErrno(errno, "stat of lock file " + path);
  }
  return held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

Result<std::unique_ptr<FileLock>> LockOnce(const std::string& path, bool* removed) {
  *removed = false;
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Status::FromErrno(errno, "open of lock file " + path);
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    const long holder = err == EWOULDBLOCK ? ReadHolderPid(fd) : 0;
    ::close(fd);
    if (err != EWOULDBLOCK) return Status::FromErrno(err, "lock of file " + path);
    std::string who = "another opener";
    if (holder != 0) {
      who = "process " + std::to_string(holder) +
            (holder == static_cast<long>(::getpid()) ? " (this process)" : "");
    }
    return Status::Unavailable("lock of file " + path + ": held by " + who);
  }
  Result<bool> same = StillAtPath(fd, path);
  if (same.ok() && !*same) {
    ::close(fd);
    *removed = true;
    return Status::Unavailable("lock of file " + path + ": removed while locking");
  }
  const Status written = same.ok() ? WritePid(fd, path) : same.status();
  if (!written.ok()) {
    ::close(fd);
    return written;
  }
  return std::unique_ptr<FileLock>(new PosixFileLock(fd, path));
}

}  // namespace

Result<std::unique_ptr<FileLock>> LockFilePosix(const std::string& path) {
  for (int attempt = 0; attempt < kLockAttemptsMax; ++attempt) {
    bool removed = false;
    Result<std::unique_ptr<FileLock>> lock = LockOnce(path, &removed);
    if (!removed) return lock;
  }
  return Status::Unavailable("lock of file " + path + ": removed by its holder " +
                             std::to_string(kLockAttemptsMax) + " times while locking");
}

}  // namespace strata::io
