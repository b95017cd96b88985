// Env: every file and clock access of storage/ goes through an Env, so tests
// can swap in a fault-injecting Env (EIO/ENOSPC on chosen operations, short
// reads, added latency, dropping unsynced writes to simulate a crash).
//
// Thread safety: an Env is shared by all threads; its methods are
// thread-safe. A File may be read and written concurrently at disjoint
// offsets; Close/Sync need no other call in flight on the same File.
// Ownership: Env::Default() is a process-wide singleton, never deleted; Files
// are owned by their caller (unique_ptr) and closed in their destructor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/status.h"

namespace strata::io {

struct FileOptions {
  bool create = false;     // create when missing
  bool truncate = false;   // drop existing content
  bool direct = false;     // O_DIRECT: offsets, lengths and buffers 4 KiB aligned
  bool read_only = false;  // open for reading only
};

// A file opened through an Env. Offsets are absolute (pread/pwrite style).
class File {
 public:
  virtual ~File() = default;

  // Reads up to `len` bytes at `offset` into `buf`; `*bytes_read` is what was
  // read (less than len only at end of file). Errors name the file and offset.
  [[nodiscard]] virtual Status Read(uint64_t offset, size_t len, void* buf, size_t* bytes_read) = 0;
  // Writes all `len` bytes at `offset`, or fails naming the file and offset.
  [[nodiscard]] virtual Status Write(uint64_t offset, const void* buf, size_t len) = 0;
  // fdatasync: what was written is durable when this returns OK.
  [[nodiscard]] virtual Status Sync() = 0;
  [[nodiscard]] virtual Status Truncate(uint64_t size) = 0;
  [[nodiscard]] virtual Result<uint64_t> Size() const = 0;

  // The OS descriptor, for the io_uring path (-1 for files with no fd).
  // Reads and writes issued on it bypass fault injection; the Env's
  // fault hooks (FaultEnv) are consulted by io::IoThreads instead.
  virtual int fd() const = 0;
  virtual const std::string& path() const = 0;
  // True when opened with O_DIRECT: every request on it must be 4 KiB aligned.
  virtual bool direct() const { return false; }
};

class FaultEnv;

// An exclusive advisory lock on a file (flock), held until this object is
// destroyed. Released by the kernel when its process dies, so a lock left by
// a dead process never blocks.
class FileLock {
 public:
  virtual ~FileLock() = default;
  virtual const std::string& path() const = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The real file system (POSIX). Never null, never deleted.
  static Env* Default();

  [[nodiscard]] virtual Result<std::unique_ptr<File>> OpenFile(const std::string& path,
                                                               const FileOptions& options) = 0;
  [[nodiscard]] virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  [[nodiscard]] virtual Status DeleteFile(const std::string& path) = 0;
  // Creates one directory (its parent must exist): true when created, false
  // when it already existed; an error when `path` is something else.
  [[nodiscard]] virtual Result<bool> CreateDir(const std::string& path) = 0;
  // Creates `path` and its missing parents (mkdir -p) through CreateDir, and
  // makes every level's entry durable (SyncDir of each parent, also of levels
  // that existed: an earlier call may have died before syncing them).
  [[nodiscard]] Status CreateDirs(const std::string& path);
  // fsync of a directory, making renames and creations in it durable.
  [[nodiscard]] virtual Status SyncDir(const std::string& path) = 0;
  // Replaces dir/name with `bytes` so that a crash leaves the old file or the
  // new one, never part of one: writes dir/tmp_name, fsyncs it, renames it
  // over dir/name and fsyncs dir. *in_doubt (may be null) is set when the
  // failure came at or after the rename: the new file may be visible now and
  // may or may not survive a power loss.
  [[nodiscard]] Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                           const std::string& tmp_name, const std::string& bytes,
                                           bool* in_doubt = nullptr);
  [[nodiscard]] virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  // Creates `path` when missing and takes an exclusive lock on it, without
  // waiting: Unavailable naming the file and, when it wrote one, the holder's
  // pid when another FileLock holds it, in this process or another. The
  // holder writes its pid into the file. The file is never deleted (a lock
  // on an unlinked file would not exclude a later opener).
  [[nodiscard]] virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path) = 0;

  // Monotonic clock in microseconds.
  virtual uint64_t NowMicros() = 0;

  // The fault injector behind this Env, or nullptr (the default) when it
  // injects nothing. io::IoThreads consults it for reads and writes it issues
  // on File::fd() directly.
  virtual FaultEnv* AsFaultEnv() { return nullptr; }
};

}  // namespace strata::io
