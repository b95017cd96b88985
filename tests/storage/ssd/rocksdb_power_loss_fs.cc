// RocksPowerLossFs: the counting, power-cutting rocksdb::FileSystem and its
// file wrappers (the crash model is in rocksdb_power_loss_model.cc).
#include "tests/storage/ssd/rocksdb_power_loss_fs.h"

#include <rocksdb/env.h>
#include <rocksdb/system_clock.h>

#include <memory>
#include <string>
#include <utility>

#include "tests/storage/ssd/rocksdb_power_loss_fs_internal.h"

namespace strata::storage::testing {

using rocksdb::FileOptions;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

namespace {

// What every file wrapper does around a call: count it, refuse it once the
// power is cut, and keep the SyncState of what it writes.
class FileTracker {
 public:
  FileTracker(PowerLossFileSystem* fs, std::shared_ptr<SyncState> state, std::string path)
      : fs_(fs), state_(std::move(state)), path_(std::move(path)) {}

  template <typename Fn>
  IOStatus Call(Fn call) const {
    return fs_->Counted(path_, call);
  }
  template <typename Fn>
  IOStatus Append(Fn append, uint64_t bytes) const {
    IOStatus s = Call(append);
    if (s.ok()) fs_->Appended(state_.get(), bytes);
    return s;
  }
  template <typename Fn>
  IOStatus WriteAt(Fn write, uint64_t end) const {
    IOStatus s = Call(write);
    if (s.ok()) fs_->WroteTo(state_.get(), end);
    return s;
  }
  template <typename Fn>
  IOStatus Truncate(Fn truncate, uint64_t size) const {
    IOStatus s = Call(truncate);
    if (s.ok()) fs_->Truncated(state_.get(), size);
    return s;
  }
  template <typename Fn>
  IOStatus Sync(Fn sync) const {
    const uint64_t size = fs_->SizeOf(state_.get());  // what the sync covers at least
    IOStatus s = Call(sync);
    if (s.ok()) fs_->Synced(state_.get(), size);
    return s;
  }

 private:
  PowerLossFileSystem* const fs_;
  const std::shared_ptr<SyncState> state_;  // nullptr for readers
  const std::string path_;
};

// Close, flush and syncs, alike for both kinds of writable files.
template <typename OwnerWrapper, typename File>
class TrackedWriter : public OwnerWrapper {
 public:
  TrackedWriter(std::unique_ptr<File> f, FileTracker t)
      : OwnerWrapper(std::move(f)), t_(std::move(t)) {}

  IOStatus Close(const IOOptions& o, IODebugContext* g) override {
    return t_.Call([&] { return this->target()->Close(o, g); });
  }
  IOStatus Flush(const IOOptions& o, IODebugContext* g) override {
    return t_.Call([&] { return this->target()->Flush(o, g); });
  }
  IOStatus Sync(const IOOptions& o, IODebugContext* g) override {
    return t_.Sync([&] { return this->target()->Sync(o, g); });
  }
  IOStatus Fsync(const IOOptions& o, IODebugContext* g) override {
    return t_.Sync([&] { return this->target()->Fsync(o, g); });
  }

 protected:
  const FileTracker t_;
};

class Writable final
    : public TrackedWriter<rocksdb::FSWritableFileOwnerWrapper, rocksdb::FSWritableFile> {
 public:
  using TrackedWriter::TrackedWriter;

  IOStatus Append(const Slice& d, const IOOptions& o, IODebugContext* g) override {
    return t_.Append([&] { return target()->Append(d, o, g); }, d.size());
  }
  IOStatus Append(const Slice& d, const IOOptions& o, const rocksdb::DataVerificationInfo& v,
                  IODebugContext* g) override {
    return t_.Append([&] { return target()->Append(d, o, v, g); }, d.size());
  }
  IOStatus PositionedAppend(const Slice& d, uint64_t off, const IOOptions& o,
                            IODebugContext* g) override {
    return t_.WriteAt([&] { return target()->PositionedAppend(d, off, o, g); }, off + d.size());
  }
  IOStatus PositionedAppend(const Slice& d, uint64_t off, const IOOptions& o,
                            const rocksdb::DataVerificationInfo& v, IODebugContext* g) override {
    return t_.WriteAt([&] { return target()->PositionedAppend(d, off, o, v, g); }, off + d.size());
  }
  IOStatus Truncate(uint64_t size, const IOOptions& o, IODebugContext* g) override {
    return t_.Truncate([&] { return target()->Truncate(size, o, g); }, size);
  }
  // sync_file_range: data only, not durable.
  IOStatus RangeSync(uint64_t off, uint64_t n, const IOOptions& o, IODebugContext* g) override {
    return t_.Call([&] { return target()->RangeSync(off, n, o, g); });
  }
  IOStatus Allocate(uint64_t off, uint64_t n, const IOOptions& o, IODebugContext* g) override {
    return t_.Call([&] { return target()->Allocate(off, n, o, g); });
  }
};

class RandomRw final
    : public TrackedWriter<rocksdb::FSRandomRWFileOwnerWrapper, rocksdb::FSRandomRWFile> {
 public:
  using TrackedWriter::TrackedWriter;

  IOStatus Write(uint64_t off, const Slice& d, const IOOptions& o, IODebugContext* g) override {
    return t_.WriteAt([&] { return target()->Write(off, d, o, g); }, off + d.size());
  }
  IOStatus Read(uint64_t off, size_t n, const IOOptions& o, Slice* r, char* scratch,
                IODebugContext* g) const override {
    return t_.Call([&] { return target()->Read(off, n, o, r, scratch, g); });
  }
};

class Sequential final : public rocksdb::FSSequentialFileOwnerWrapper {
 public:
  Sequential(std::unique_ptr<rocksdb::FSSequentialFile> f, FileTracker t)
      : FSSequentialFileOwnerWrapper(std::move(f)), t_(std::move(t)) {}

  IOStatus Read(size_t n, const IOOptions& o, Slice* r, char* scratch, IODebugContext* g) override {
    return t_.Call([&] { return target()->Read(n, o, r, scratch, g); });
  }
  IOStatus PositionedRead(uint64_t off, size_t n, const IOOptions& o, Slice* r, char* scratch,
                          IODebugContext* g) override {
    return t_.Call([&] { return target()->PositionedRead(off, n, o, r, scratch, g); });
  }

 private:
  const FileTracker t_;
};

class RandomAccess final : public rocksdb::FSRandomAccessFileOwnerWrapper {
 public:
  RandomAccess(std::unique_ptr<rocksdb::FSRandomAccessFile> f, FileTracker t)
      : FSRandomAccessFileOwnerWrapper(std::move(f)), t_(std::move(t)) {}

  IOStatus Read(uint64_t off, size_t n, const IOOptions& o, Slice* r, char* scratch,
                IODebugContext* g) const override {
    return t_.Call([&] { return target()->Read(off, n, o, r, scratch, g); });
  }
  IOStatus MultiRead(rocksdb::FSReadRequest* reqs, size_t n, const IOOptions& o,
                     IODebugContext* g) override {
    return t_.Call([&] { return target()->MultiRead(reqs, n, o, g); });
  }
  IOStatus Prefetch(uint64_t off, size_t n, const IOOptions& o, IODebugContext* g) override {
    return t_.Call([&] { return target()->Prefetch(off, n, o, g); });
  }
  IOStatus ReadAsync(rocksdb::FSReadRequest& req, const IOOptions& o,
                     std::function<void(const rocksdb::FSReadRequest&, void*)> cb, void* cb_arg,
                     void** handle, rocksdb::IOHandleDeleter* del, IODebugContext* g) override {
    return t_.Call([&] { return target()->ReadAsync(req, o, cb, cb_arg, handle, del, g); });
  }

 private:
  const FileTracker t_;
};

// A directory handle: its fsync makes the changes in it durable. It follows
// renames of the directory (by id in open_dirs_).
class Directory final : public rocksdb::FSDirectory {
 public:
  Directory(std::unique_ptr<rocksdb::FSDirectory> d, PowerLossFileSystem* fs, std::string path)
      : target_(std::move(d)), fs_(fs), path_(std::move(path)), id_(fs->OpenDir(path_)) {}
  ~Directory() override { fs_->CloseDir(id_); }

  IOStatus Fsync(const IOOptions& o, IODebugContext* g) override {
    return SyncWith([&] { return target_->Fsync(o, g); });
  }
  IOStatus FsyncWithDirOptions(const IOOptions& o, IODebugContext* g,
                               const rocksdb::DirFsyncOptions& d) override {
    return SyncWith([&] { return target_->FsyncWithDirOptions(o, g, d); });
  }
  IOStatus Close(const IOOptions& o, IODebugContext* g) override {
    return fs_->Counted(path_, [&] { return target_->Close(o, g); });
  }
  size_t GetUniqueId(char* id, size_t max_size) const override {
    return target_->GetUniqueId(id, max_size);
  }

 private:
  template <typename Fn>
  IOStatus SyncWith(Fn sync) {
    const uint64_t seq = fs_->NextSeq();
    IOStatus s = fs_->Counted(path_, sync);
    if (s.ok()) fs_->DirSynced(id_, seq);
    return s;
  }

  const std::unique_ptr<rocksdb::FSDirectory> target_;
  PowerLossFileSystem* const fs_;
  const std::string path_;  // as opened (for messages)
  const uint64_t id_;
};

}  // namespace

IOStatus PowerLossFileSystem::Tick(const std::string& what) {
  const uint64_t n = ops_.fetch_add(1, std::memory_order_relaxed) + 1;
  const uint64_t cut = cut_at_.load(std::memory_order_relaxed);
  if (cut != 0 && n >= cut) return IOStatus::IOError("power cut at op " + std::to_string(n), what);
  return IOStatus::OK();
}

// Opens and creates.

namespace {

// Opens a reader through `open` (the base call) and wraps it.
template <typename Wrapper, typename Base, typename Fn>
IOStatus OpenReader(PowerLossFileSystem* fs, const std::string& f, std::unique_ptr<Base>* r,
                    Fn open) {
  std::unique_ptr<Base> base;
  IOStatus s = fs->Counted(f, [&] { return open(&base); });
  if (s.ok()) *r = std::make_unique<Wrapper>(std::move(base), FileTracker(fs, nullptr, f));
  return s;
}

}  // namespace

IOStatus PowerLossFileSystem::NewSequentialFile(const std::string& f, const FileOptions& o,
                                                std::unique_ptr<rocksdb::FSSequentialFile>* r,
                                                IODebugContext* g) {
  return OpenReader<Sequential>(
      this, f, r, [&](auto* base) { return target()->NewSequentialFile(f, o, base, g); });
}

IOStatus PowerLossFileSystem::NewRandomAccessFile(const std::string& f, const FileOptions& o,
                                                  std::unique_ptr<rocksdb::FSRandomAccessFile>* r,
                                                  IODebugContext* g) {
  return OpenReader<RandomAccess>(
      this, f, r, [&](auto* base) { return target()->NewRandomAccessFile(f, o, base, g); });
}

IOStatus PowerLossFileSystem::OpenWritable(const std::string& f, const FileOptions& o,
                                           std::unique_ptr<rocksdb::FSWritableFile>* r,
                                           IODebugContext* g, bool truncate) {
  std::unique_ptr<rocksdb::FSWritableFile> base;
  std::shared_ptr<SyncState> state;
  IOStatus s = Counted(f, [&] {
    return OpenTracked(f, truncate, &state, [&] {
      return truncate ? target()->NewWritableFile(f, o, &base, g)
                      : target()->ReopenWritableFile(f, o, &base, g);
    });
  });
  if (s.ok()) {
    *r = std::make_unique<Writable>(std::move(base),
                                    FileTracker(this, std::move(state), NormalizePath(f)));
  }
  return s;
}

IOStatus PowerLossFileSystem::ReuseWritableFile(const std::string& f, const std::string& old,
                                                const FileOptions& o,
                                                std::unique_ptr<rocksdb::FSWritableFile>* r,
                                                IODebugContext* g) {
  IOStatus s = Tick(f);
  if (!s.ok()) return s;
  base::MutexLock lock(&mu_);
  uint64_t size = 0;  // the reused file's content counts as synced
  s = target()->GetFileSize(old, IOOptions(), &size, nullptr);
  std::unique_ptr<rocksdb::FSWritableFile> base;
  if (s.ok()) {
    s = RenameLocked(old, f, [&] { return target()->ReuseWritableFile(f, old, o, &base, g); });
  }
  if (!s.ok()) return s;
  const std::string path = NormalizePath(f);
  *r =
      std::make_unique<Writable>(std::move(base), FileTracker(this, TrackLocked(path, size), path));
  return s;
}

IOStatus PowerLossFileSystem::NewRandomRWFile(const std::string& f, const FileOptions& o,
                                              std::unique_ptr<rocksdb::FSRandomRWFile>* r,
                                              IODebugContext* g) {
  std::unique_ptr<rocksdb::FSRandomRWFile> base;
  std::shared_ptr<SyncState> state;
  IOStatus s = Counted(f, [&] {
    return OpenTracked(f, /*truncate=*/false, &state,
                       [&] { return target()->NewRandomRWFile(f, o, &base, g); });
  });
  if (s.ok()) {
    *r = std::make_unique<RandomRw>(std::move(base),
                                    FileTracker(this, std::move(state), NormalizePath(f)));
  }
  return s;
}

IOStatus PowerLossFileSystem::NewDirectory(const std::string& d, const IOOptions& o,
                                           std::unique_ptr<rocksdb::FSDirectory>* r,
                                           IODebugContext* g) {
  std::unique_ptr<rocksdb::FSDirectory> base;
  IOStatus s = Tick(d);
  if (s.ok()) s = target()->NewDirectory(d, o, &base, g);
  if (s.ok()) *r = std::make_unique<Directory>(std::move(base), this, NormalizePath(d));
  return s;
}

IOStatus PowerLossFileSystem::MakeDir(const std::string& d, const IOOptions& o, IODebugContext* g,
                                      bool if_missing) {
  IOStatus s = Tick(d);
  if (!s.ok()) return s;
  const std::string path = NormalizePath(d);
  base::MutexLock lock(&mu_);
  const bool existed = ExistsLocked(path);
  s = if_missing ? target()->CreateDirIfMissing(d, o, g) : target()->CreateDir(d, o, g);
  if (s.ok() && !existed) {
    AddChangeLocked({.kind = Change::Kind::kCreate, .path = path});
  }
  return s;
}

IOStatus PowerLossFileSystem::NewLogger(const std::string& f, const IOOptions& o,
                                        std::shared_ptr<rocksdb::Logger>* r, IODebugContext* g) {
  IOStatus s = Tick(f);
  if (!s.ok()) return s;
  const std::string path = NormalizePath(f);
  base::MutexLock lock(&mu_);
  const bool existed = ExistsLocked(path);
  s = target()->NewLogger(f, o, r, g);  // its writes bypass the wrapper: content untracked
  if (s.ok() && !existed) AddChangeLocked({.kind = Change::Kind::kCreate, .path = path});
  return s;
}

namespace {

// Once the power is cut, RocksDB's back-off sleeps (a second after a failed
// background flush or compaction) return at once: nothing it retries can work.
class PowerLossClock final : public rocksdb::SystemClockWrapper {
 public:
  PowerLossClock(const std::shared_ptr<rocksdb::SystemClock>& base, PowerLossFileSystem* fs)
      : SystemClockWrapper(base), fs_(fs) {}
  const char* Name() const override { return "StrataPowerLossClock"; }
  void SleepForMicroseconds(int micros) override {
    if (!fs_->power_cut()) target_->SleepForMicroseconds(micros);
  }

 private:
  PowerLossFileSystem* const fs_;
};

// Env::Default() with the file system and the clock above.
class PowerLossEnv final : public rocksdb::EnvWrapper {
 public:
  explicit PowerLossEnv(const std::shared_ptr<PowerLossFileSystem>& fs)
      : EnvWrapper(rocksdb::NewCompositeEnv(fs)) {
    // What RocksDB uses (env->GetFileSystem(), GetSystemClock()); the Env's
    // own file calls reach the same file system through the composite Env.
    file_system_ = fs;
    system_clock_ = std::make_shared<PowerLossClock>(target()->GetSystemClock(), fs.get());
  }
  const char* Name() const override { return "StrataPowerLossEnv"; }
};

}  // namespace

RocksPowerLossFs::RocksPowerLossFs()
    : fs_(std::make_shared<PowerLossFileSystem>(rocksdb::FileSystem::Default())),
      env_(std::make_unique<PowerLossEnv>(fs_)) {}

RocksPowerLossFs::~RocksPowerLossFs() = default;

rocksdb::Env* RocksPowerLossFs::env() { return env_.get(); }
void RocksPowerLossFs::CutPowerAtOp(uint64_t n) { fs_->CutPowerAtOp(n); }
uint64_t RocksPowerLossFs::ops_seen() const { return fs_->ops_seen(); }
Status RocksPowerLossFs::DropUnsyncedData() { return fs_->DropUnsyncedData(); }

}  // namespace strata::storage::testing
