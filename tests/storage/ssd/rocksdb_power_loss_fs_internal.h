// Internal to RocksPowerLossFs (rocksdb_power_loss_fs.h): the rocksdb::
// FileSystem behind it. rocksdb_power_loss_fs.cc counts and cuts the calls,
// wraps the files and builds the Env (whose clock skips sleeps once the power
// is cut); rocksdb_power_loss_model.cc keeps the crash model and applies it
// (DropUnsyncedData).
//
// The model. Content: every file written through the wrapper has a SyncState
// (shared by its hard links) with its size and its size at the last sync; the
// power loss truncates it to the latter. Names: every create, link and rename
// is a Change, kept until an fsync of the directory holding the new name; the
// power loss undoes the Changes left, newest first. A rename moves the states
// and Changes inside a renamed directory along with it, and so does its undo.
//
// Thread safety: all methods are thread-safe (mu_ guards the model, held
// across the base call of a create, rename, link or delete so the model and
// the disk change together). Ownership: the base FileSystem is shared.
#pragma once

#include <rocksdb/file_system.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "strata/status.h"

namespace strata::storage::testing {

// "a//b/" -> "a/b": RocksDB joins names as dir + "/" + name, sometimes twice.
std::string NormalizePath(const std::string& path);
std::string ParentOf(const std::string& path);

// What a power loss leaves of one file: its first synced_size bytes. Read
// and written with PowerLossFileSystem::mu_ held; not annotated, as it is
// shared (by pointer) with the files and the analysis cannot name the file
// system's mutex from here.
struct SyncState {
  uint64_t size = 0;
  uint64_t synced_size = 0;
};

// A create, hard link or rename whose new name is not durable yet.
struct Change {
  enum class Kind : uint8_t { kCreate, kRename };
  Kind kind = Kind::kCreate;
  uint64_t seq = 0;              // order of the changes
  std::string path;              // the new name
  std::string from;              // kRename: the old name
  bool replaced = false;         // kRename: a file stood at `path` ...
  std::string replaced_content;  // ... with this synced content
};

class PowerLossFileSystem final : public rocksdb::FileSystemWrapper {
 public:
  using IOStatus = rocksdb::IOStatus;
  using IOOptions = rocksdb::IOOptions;
  using FileOptions = rocksdb::FileOptions;
  using IODebugContext = rocksdb::IODebugContext;

  explicit PowerLossFileSystem(const std::shared_ptr<rocksdb::FileSystem>& base)
      : rocksdb::FileSystemWrapper(base) {}
  const char* Name() const override { return "StrataPowerLossFs"; }

  // Counts one call; an IOError naming `what` once the power is cut.
  IOStatus Tick(const std::string& what);
  // Counts the call and makes it unless the power is cut.
  template <typename Fn>
  IOStatus Counted(const std::string& what, Fn call) {
    IOStatus s = Tick(what);
    return s.ok() ? call() : s;
  }
  void CutPowerAtOp(uint64_t n) { cut_at_.store(n, std::memory_order_relaxed); }
  uint64_t ops_seen() const { return ops_.load(std::memory_order_relaxed); }
  // The cut was reached: calls are being refused.
  bool power_cut() const {
    const uint64_t cut = cut_at_.load(std::memory_order_relaxed);
    return cut != 0 && ops_seen() >= cut;
  }
  Status DropUnsyncedData();

  // The files' bookkeeping.
  void WroteTo(SyncState* s, uint64_t end);  // a write ending at `end`
  void Appended(SyncState* s, uint64_t bytes);
  void Truncated(SyncState* s, uint64_t size);  // durable at once, like O_TRUNC
  uint64_t SizeOf(const SyncState* s);
  void Synced(SyncState* s, uint64_t size);  // a sync that began at `size`
  // Directory handles: an id follows renames of the directory.
  uint64_t OpenDir(const std::string& path);
  void CloseDir(uint64_t id);
  // A directory fsync that began when the next change was NextSeq() makes
  // the changes before it in that directory durable.
  uint64_t NextSeq();
  void DirSynced(uint64_t id, uint64_t seq);

  // FileSystem: opens and creates (rocksdb_power_loss_fs.cc).
  IOStatus NewSequentialFile(const std::string& f, const FileOptions& o,
                             std::unique_ptr<rocksdb::FSSequentialFile>* r,
                             IODebugContext* g) override;
  IOStatus NewRandomAccessFile(const std::string& f, const FileOptions& o,
                               std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                               IODebugContext* g) override;
  IOStatus NewWritableFile(const std::string& f, const FileOptions& o,
                           std::unique_ptr<rocksdb::FSWritableFile>* r,
                           IODebugContext* g) override {
    return OpenWritable(f, o, r, g, /*truncate=*/true);
  }
  IOStatus ReopenWritableFile(const std::string& f, const FileOptions& o,
                              std::unique_ptr<rocksdb::FSWritableFile>* r,
                              IODebugContext* g) override {
    return OpenWritable(f, o, r, g, /*truncate=*/false);
  }
  IOStatus ReuseWritableFile(const std::string& f, const std::string& old, const FileOptions& o,
                             std::unique_ptr<rocksdb::FSWritableFile>* r,
                             IODebugContext* g) override;
  IOStatus NewRandomRWFile(const std::string& f, const FileOptions& o,
                           std::unique_ptr<rocksdb::FSRandomRWFile>* r, IODebugContext* g) override;
  IOStatus NewDirectory(const std::string& d, const IOOptions& o,
                        std::unique_ptr<rocksdb::FSDirectory>* r, IODebugContext* g) override;
  IOStatus CreateDir(const std::string& d, const IOOptions& o, IODebugContext* g) override {
    return MakeDir(d, o, g, /*if_missing=*/false);
  }
  IOStatus CreateDirIfMissing(const std::string& d, const IOOptions& o,
                              IODebugContext* g) override {
    return MakeDir(d, o, g, /*if_missing=*/true);
  }
  IOStatus NewLogger(const std::string& f, const IOOptions& o, std::shared_ptr<rocksdb::Logger>* r,
                     IODebugContext* g) override;

  // FileSystem: names (rocksdb_power_loss_model.cc).
  IOStatus RenameFile(const std::string& from, const std::string& to, const IOOptions& o,
                      IODebugContext* g) override;
  IOStatus LinkFile(const std::string& from, const std::string& to, const IOOptions& o,
                    IODebugContext* g) override;
  IOStatus DeleteFile(const std::string& f, const IOOptions& o, IODebugContext* g) override;
  IOStatus DeleteDir(const std::string& d, const IOOptions& o, IODebugContext* g) override;
  IOStatus Truncate(const std::string& f, size_t size, const IOOptions& o,
                    IODebugContext* g) override;

  // FileSystem: counted and forwarded.
  IOStatus NewMemoryMappedFileBuffer(const std::string& f,
                                     std::unique_ptr<rocksdb::MemoryMappedFileBuffer>* r) override {
    return Counted(f, [&] { return target()->NewMemoryMappedFileBuffer(f, r); });
  }
  IOStatus FileExists(const std::string& f, const IOOptions& o, IODebugContext* g) override {
    ops_.fetch_add(1, std::memory_order_relaxed);  // counted, never refused (see the header)
    return target()->FileExists(f, o, g);
  }
  IOStatus GetChildren(const std::string& d, const IOOptions& o, std::vector<std::string>* r,
                       IODebugContext* g) override {
    return Counted(d, [&] { return target()->GetChildren(d, o, r, g); });
  }
  IOStatus GetChildrenFileAttributes(const std::string& d, const IOOptions& o,
                                     std::vector<rocksdb::FileAttributes>* r,
                                     IODebugContext* g) override {
    return Counted(d, [&] { return target()->GetChildrenFileAttributes(d, o, r, g); });
  }
  IOStatus GetFileSize(const std::string& f, const IOOptions& o, uint64_t* r,
                       IODebugContext* g) override {
    return Counted(f, [&] { return target()->GetFileSize(f, o, r, g); });
  }
  IOStatus GetFileModificationTime(const std::string& f, const IOOptions& o, uint64_t* r,
                                   IODebugContext* g) override {
    return Counted(f, [&] { return target()->GetFileModificationTime(f, o, r, g); });
  }
  IOStatus GetAbsolutePath(const std::string& f, const IOOptions& o, std::string* r,
                           IODebugContext* g) override {
    return Counted(f, [&] { return target()->GetAbsolutePath(f, o, r, g); });
  }
  IOStatus NumFileLinks(const std::string& f, const IOOptions& o, uint64_t* r,
                        IODebugContext* g) override {
    return Counted(f, [&] { return target()->NumFileLinks(f, o, r, g); });
  }
  IOStatus AreFilesSame(const std::string& a, const std::string& b, const IOOptions& o, bool* r,
                        IODebugContext* g) override {
    return Counted(a, [&] { return target()->AreFilesSame(a, b, o, r, g); });
  }
  IOStatus LockFile(const std::string& f, const IOOptions& o, rocksdb::FileLock** r,
                    IODebugContext* g) override {
    return Counted(f, [&] { return target()->LockFile(f, o, r, g); });
  }
  IOStatus UnlockFile(rocksdb::FileLock* l, const IOOptions& o, IODebugContext* g) override {
    ops_.fetch_add(1, std::memory_order_relaxed);  // counted, never refused (see the header)
    return target()->UnlockFile(l, o, g);
  }
  IOStatus GetFreeSpace(const std::string& p, const IOOptions& o, uint64_t* r,
                        IODebugContext* g) override {
    return Counted(p, [&] { return target()->GetFreeSpace(p, o, r, g); });
  }
  IOStatus IsDirectory(const std::string& p, const IOOptions& o, bool* r,
                       IODebugContext* g) override {
    return Counted(p, [&] { return target()->IsDirectory(p, o, r, g); });
  }

 private:
  IOStatus OpenWritable(const std::string& f, const FileOptions& o,
                        std::unique_ptr<rocksdb::FSWritableFile>* r, IODebugContext* g,
                        bool truncate);
  IOStatus MakeDir(const std::string& d, const IOOptions& o, IODebugContext* g, bool if_missing);
  // Makes `open` (the base call opening `f` for writing) and tracks the file:
  // its SyncState in `state`, a new name as a change; `truncate`: O_TRUNC.
  IOStatus OpenTracked(const std::string& f, bool truncate, std::shared_ptr<SyncState>* state,
                       const std::function<IOStatus()>& open);
  // Makes `remove` (the base call deleting `path`) and forgets the path.
  IOStatus Remove(const std::string& path, bool with_children,
                  const std::function<IOStatus()>& remove);

  // Makes `rename` (from -> to, by the base) and records it.
  IOStatus RenameLocked(const std::string& from, const std::string& to,
                        const std::function<IOStatus()>& rename) REQUIRES(mu_);
  bool ExistsLocked(const std::string& path) REQUIRES(mu_);
  // The state of `path` (made when untracked, synced up to `size`).
  std::shared_ptr<SyncState> TrackLocked(const std::string& path, uint64_t size) REQUIRES(mu_);
  void AddChangeLocked(Change c) REQUIRES(mu_);
  // `path` is gone for good: forget its state and the changes that made it.
  void ForgetLocked(const std::string& path, bool with_children) REQUIRES(mu_);
  // Moves the states, open directories and changes_[0, changes_end) at or
  // under `from` to `to` (a rename).
  void RebaseLocked(const std::string& from, const std::string& to, size_t changes_end)
      REQUIRES(mu_);
  // The content a power loss would leave at `path` (all of an untracked file).
  IOStatus SyncedContentLocked(const std::string& path, std::string* content) REQUIRES(mu_);
  IOStatus TruncateLocked(const std::string& path, uint64_t size) REQUIRES(mu_);
  IOStatus UndoLocked(const Change& c, size_t index) REQUIRES(mu_);
  IOStatus RemoveAllLocked(const std::string& path) REQUIRES(mu_);

  std::atomic<uint64_t> ops_{0};
  std::atomic<uint64_t> cut_at_{0};

  base::Mutex mu_;
  std::map<std::string, std::shared_ptr<SyncState>> files_ GUARDED_BY(mu_);
  std::vector<Change> changes_ GUARDED_BY(mu_);  // oldest first
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::string> open_dirs_ GUARDED_BY(mu_);  // id -> path
  uint64_t next_dir_id_ GUARDED_BY(mu_) = 0;
};

}  // namespace strata::storage::testing
