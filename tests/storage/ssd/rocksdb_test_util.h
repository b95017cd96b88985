// Helpers of the RocksDB backend's tests: RocksDbTestOptions (a small store)
// and FaultFs, a rocksdb::FileSystem wrapper (passed through
// RowStoreOptions::rocksdb_env). While a flag is set FaultFs fails writes and
// syncs (EIO, or ENOSPC with `no_space`), reads of data files, renames onto
// the CHECKPOINT pointer, fsyncs of the pointer's directory after such a
// rename, or new files or deletions under a `ckpt-*` directory (EIO). It
// records every directory fsynced.
//
// Thread safety: flags are atomics, the record is guarded by a mutex; RocksDB
// calls FaultFs from its background threads. Ownership: FaultFs is held by
// shared_ptr, as any RocksDB FileSystem; the Env made from it must outlive
// the store.
#pragma once

#include <rocksdb/env.h>
#include <rocksdb/file_system.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>

#include "base/mutex.h"
#include "storage/ssd/row_store_factory.h"

namespace strata::storage::testing {

// A RocksDB store in `dir` with a 1 MiB block cache, through `env` (nullptr:
// rocksdb::Env::Default()).
inline RowStoreOptions RocksDbTestOptions(const std::string& dir, rocksdb::Env* env = nullptr) {
  RowStoreOptions o;
  o.backend = SsdBackend::kRocksDb;
  o.dir = dir;
  o.rocksdb_block_cache_bytes = 1 << 20;
  o.rocksdb_env = env;
  return o;
}

class FaultFs : public rocksdb::FileSystemWrapper {
 public:
  explicit FaultFs(const std::shared_ptr<rocksdb::FileSystem>& base)
      : rocksdb::FileSystemWrapper(base) {}
  const char* Name() const override { return "StrataFaultFs"; }

  std::atomic<bool> fail_writes{false}, fail_reads{false};
  std::atomic<bool> no_space{false};
  std::atomic<bool> fail_pointer_renames{false};
  std::atomic<bool> fail_checkpoint_creates{false};  // new files under ckpt-*
  std::atomic<bool> fail_checkpoint_deletes{false};  // deletions under ckpt-*
  // Fails fsyncs of the store directory after a rename onto its CHECKPOINT
  // made while set.
  std::atomic<bool> fail_dir_syncs_after_pointer_rename{false};

  // `dir` (no trailing slash) was fsynced since the FaultFs was made.
  bool DirSynced(const std::string& dir) {
    base::MutexLock lock(&mu_);
    return synced_dirs_.count(dir) != 0;
  }

  rocksdb::IOStatus WriteError() const {
    return no_space ? rocksdb::IOStatus::NoSpace("injected ENOSPC")
                    : rocksdb::IOStatus::IOError("injected EIO");
  }

  class Writable : public rocksdb::FSWritableFileOwnerWrapper {
   public:
    Writable(std::unique_ptr<rocksdb::FSWritableFile> f, FaultFs* fs)
        : FSWritableFileOwnerWrapper(std::move(f)), fs_(fs) {}
    rocksdb::IOStatus Append(const rocksdb::Slice& d, const rocksdb::IOOptions& o,
                             rocksdb::IODebugContext* g) override {
      return fs_->fail_writes ? fs_->WriteError() : FSWritableFileOwnerWrapper::Append(d, o, g);
    }
    rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& d, uint64_t off,
                                       const rocksdb::IOOptions& o,
                                       rocksdb::IODebugContext* g) override {
      return fs_->fail_writes ? fs_->WriteError()
                              : FSWritableFileOwnerWrapper::PositionedAppend(d, off, o, g);
    }
    rocksdb::IOStatus Sync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
      return fs_->fail_writes ? fs_->WriteError() : FSWritableFileOwnerWrapper::Sync(o, g);
    }
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
      return fs_->fail_writes ? fs_->WriteError() : FSWritableFileOwnerWrapper::Fsync(o, g);
    }

   private:
    FaultFs* fs_;
  };
  class Readable : public rocksdb::FSRandomAccessFileOwnerWrapper {
   public:
    Readable(std::unique_ptr<rocksdb::FSRandomAccessFile> f, FaultFs* fs)
        : FSRandomAccessFileOwnerWrapper(std::move(f)), fs_(fs) {}
    rocksdb::IOStatus Read(uint64_t off, size_t n, const rocksdb::IOOptions& o, rocksdb::Slice* r,
                           char* scratch, rocksdb::IODebugContext* g) const override {
      if (fs_->fail_reads) return rocksdb::IOStatus::IOError("injected EIO on read");
      return FSRandomAccessFileOwnerWrapper::Read(off, n, o, r, scratch, g);
    }
    rocksdb::IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t n, const rocksdb::IOOptions& o,
                                rocksdb::IODebugContext* g) override {
      if (fs_->fail_reads) return rocksdb::IOStatus::IOError("injected EIO on read");
      return FSRandomAccessFileOwnerWrapper::MultiRead(reqs, n, o, g);
    }

   private:
    FaultFs* fs_;
  };

  class Dir : public rocksdb::FSDirectoryWrapper {
   public:
    Dir(std::unique_ptr<rocksdb::FSDirectory> d, FaultFs* fs, std::string path)
        : FSDirectoryWrapper(std::move(d)), fs_(fs), path_(std::move(path)) {}
    rocksdb::IOStatus Fsync(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
      if (fs_->FailSync(path_)) return rocksdb::IOStatus::IOError("injected EIO on dir fsync");
      return FSDirectoryWrapper::Fsync(o, g);
    }
    rocksdb::IOStatus FsyncWithDirOptions(const rocksdb::IOOptions& o, rocksdb::IODebugContext* g,
                                          const rocksdb::DirFsyncOptions& d) override {
      if (fs_->FailSync(path_)) return rocksdb::IOStatus::IOError("injected EIO on dir fsync");
      return FSDirectoryWrapper::FsyncWithDirOptions(o, g, d);
    }

   private:
    FaultFs* fs_;
    std::string path_;
  };

  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& o,
                                 std::unique_ptr<rocksdb::FSDirectory>* r,
                                 rocksdb::IODebugContext* g) override {
    std::unique_ptr<rocksdb::FSDirectory> base;
    rocksdb::IOStatus s = target()->NewDirectory(name, o, &base, g);
    std::string path = name;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (s.ok()) *r = std::make_unique<Dir>(std::move(base), this, std::move(path));
    return s;
  }
  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to,
                               const rocksdb::IOOptions& o, rocksdb::IODebugContext* g) override {
    const bool pointer = to.size() >= 11 && to.compare(to.size() - 11, 11, "/CHECKPOINT") == 0;
    if (pointer && fail_pointer_renames)
      return rocksdb::IOStatus::IOError("injected EIO on rename");
    rocksdb::IOStatus s = target()->RenameFile(from, to, o, g);
    if (pointer && s.ok()) {
      base::MutexLock lock(&mu_);
      pointer_dir_ = fail_dir_syncs_after_pointer_rename ? to.substr(0, to.size() - 11) : "";
    }
    return s;
  }

  rocksdb::IOStatus NewWritableFile(const std::string& f, const rocksdb::FileOptions& fo,
                                    std::unique_ptr<rocksdb::FSWritableFile>* r,
                                    rocksdb::IODebugContext* g) override {
    if (fail_checkpoint_creates && InCheckpoint(f)) {
      return rocksdb::IOStatus::IOError("injected EIO creating " + f);
    }
    std::unique_ptr<rocksdb::FSWritableFile> base;
    rocksdb::IOStatus s = target()->NewWritableFile(f, fo, &base, g);
    if (s.ok()) *r = std::make_unique<Writable>(std::move(base), this);
    return s;
  }
  rocksdb::IOStatus DeleteFile(const std::string& f, const rocksdb::IOOptions& o,
                               rocksdb::IODebugContext* g) override {
    if (fail_checkpoint_deletes && InCheckpoint(f)) {
      return rocksdb::IOStatus::IOError("injected EIO deleting " + f);
    }
    return target()->DeleteFile(f, o, g);
  }
  rocksdb::IOStatus DeleteDir(const std::string& d, const rocksdb::IOOptions& o,
                              rocksdb::IODebugContext* g) override {
    if (fail_checkpoint_deletes && InCheckpoint(d)) {
      return rocksdb::IOStatus::IOError("injected EIO deleting " + d);
    }
    return target()->DeleteDir(d, o, g);
  }
  rocksdb::IOStatus NewRandomAccessFile(const std::string& f, const rocksdb::FileOptions& fo,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                        rocksdb::IODebugContext* g) override {
    std::unique_ptr<rocksdb::FSRandomAccessFile> base;
    rocksdb::IOStatus s = target()->NewRandomAccessFile(f, fo, &base, g);
    if (s.ok()) *r = std::make_unique<Readable>(std::move(base), this);
    return s;
  }

 private:
  static bool InCheckpoint(const std::string& path) {
    return path.find("/ckpt-") != std::string::npos;
  }
  // Records a directory fsync; true when it is to fail.
  bool FailSync(const std::string& dir) {
    base::MutexLock lock(&mu_);
    if (fail_dir_syncs_after_pointer_rename && dir == pointer_dir_) return true;
    synced_dirs_.insert(dir);
    return false;
  }

  base::Mutex mu_;
  std::set<std::string> synced_dirs_ GUARDED_BY(mu_);
  std::string pointer_dir_ GUARDED_BY(mu_);  // where an armed pointer rename went
};

}  // namespace strata::storage::testing
