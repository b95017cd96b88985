// Env::Default(): files, directories and the clock of a POSIX system.
// Reads and writes loop over partial transfers and EINTR; O_DIRECT files
// check 4 KiB alignment before every call (CheckDirectIo).
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "io/aligned.h"
#include "io/env.h"
#include "io/file_lock.h"

namespace strata::io {
namespace {

std::string At(const char* op, const std::string& path, uint64_t offset, size_t len) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), " at offset %" PRIu64 " length %zu", offset, len);
  return std::string(op) + " of file " + path + buf;
}

class PosixFile final : public File {
 public:
  PosixFile(int fd, std::string path, bool direct)
      : fd_(fd), path_(std::move(path)), direct_(direct) {}
  ~PosixFile() override { ::close(fd_); }

  Status Read(uint64_t offset, size_t len, void* buf, size_t* bytes_read) override {
    *bytes_read = 0;
    if (direct_) STRATA_RETURN_IF_ERROR(CheckDirectIo("read", path_, offset, len, buf));
    auto* out = static_cast<uint8_t*>(buf);
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pread(fd_, out + done, len - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(errno, At("pread", path_, offset + done, len - done));
      }
      if (n == 0) break;  // end of file
      done += static_cast<size_t>(n);
      if (direct_ && !IsAligned(done)) break;  // O_DIRECT short read: end of file
    }
    *bytes_read = done;
    return Status::Ok();
  }

  Status Write(uint64_t offset, const void* buf, size_t len) override {
    if (direct_) STRATA_RETURN_IF_ERROR(CheckDirectIo("write", path_, offset, len, buf));
    const auto* in = static_cast<const uint8_t*>(buf);
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pwrite(fd_, in + done, len - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno(errno, At("pwrite", path_, offset + done, len - done));
      }
      if (n == 0)
        return Status::IOError(At("pwrite wrote nothing", path_, offset + done, len - done));
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (::fdatasync(fd_) != 0) return Status::FromErrno(errno, "fdatasync of file " + path_);
    return Status::Ok();
  }

  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return Status::FromErrno(errno, "ftruncate of file " + path_ + " to " + std::to_string(size));
    }
    return Status::Ok();
  }

  Result<uint64_t> Size() const override {
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "fstat of file " + path_);
    return static_cast<uint64_t>(st.st_size);
  }

  int fd() const override { return fd_; }
  const std::string& path() const override { return path_; }
  bool direct() const override { return direct_; }

 private:
  const int fd_;
  const std::string path_;
  const bool direct_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<File>> OpenFile(const std::string& path,
                                         const FileOptions& options) override {
    if (options.read_only && (options.create || options.truncate)) {
      return Status::InvalidArgument("open of file " + path +
                                     ": read_only excludes create and truncate");
    }
    int flags = O_CLOEXEC | (options.read_only ? O_RDONLY : O_RDWR);
    if (options.create) flags |= O_CREAT;
    if (options.truncate) flags |= O_TRUNC;
    if (options.direct) flags |= O_DIRECT;
    int fd;
    do {
      fd = ::open(path.c_str(), flags, 0644);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
      if (errno == ENOENT) return Status::NotFound("open of file " + path + ": no such file");
      if (errno == EINVAL && options.direct) {
        return Status::InvalidArgument("open of file " + path +
                                       ": the file system refuses O_DIRECT");
      }
      return Status::FromErrno(errno, "open of file " + path);
    }
    return std::unique_ptr<File>(new PosixFile(fd, path, options.direct));
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return Status::FromErrno(errno, "rename of file " + from + " to " + to);
    }
    return Status::Ok();
  }

  Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) {
      if (errno == ENOENT) return Status::NotFound("delete of file " + path + ": no such file");
      return Status::FromErrno(errno, "delete of file " + path);
    }
    return Status::Ok();
  }

  Result<bool> CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) == 0) return true;
    if (errno != EEXIST) return Status::FromErrno(errno, "mkdir of directory " + path);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status::IOError("mkdir of directory " + path + ": exists and is not a directory");
    }
    return false;
  }

  Status SyncDir(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Status::FromErrno(errno, "open of directory " + path);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return Status::FromErrno(err, "fsync of directory " + path);
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) {
      if (errno == ENOENT)
        return Status::NotFound("list of directory " + path + ": no such directory");
      return Status::FromErrno(errno, "list of directory " + path);
    }
    std::vector<std::string> names;
    while (struct dirent* entry = ::readdir(dir)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }

  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) override {
    return LockFilePosix(path);
  }

  uint64_t NowMicros() override {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
  }
};

}  // namespace

Env* Env::Default() {
  static Env* env = new PosixEnv();
  return env;
}

}  // namespace strata::io
