// RocksPowerLossFs: the crash model (see rocksdb_power_loss_fs_internal.h)
// and the power loss that applies it.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tests/storage/ssd/rocksdb_power_loss_fs_internal.h"

namespace strata::storage::testing {
namespace {

using rocksdb::FileOptions;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

bool StrictlyUnder(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

// `path` with its prefix `from` (itself or a directory above it) replaced by `to`.
std::string Rebase(const std::string& path, const std::string& from, const std::string& to) {
  if (path == from) return to;
  if (StrictlyUnder(path, from)) return to + path.substr(from.size());
  return path;
}

}  // namespace

std::string NormalizePath(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out += c;
  }
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string ParentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// The files' bookkeeping.

void PowerLossFileSystem::WroteTo(SyncState* s, uint64_t end) {
  base::MutexLock lock(&mu_);
  s->size = std::max(s->size, end);
}

void PowerLossFileSystem::Appended(SyncState* s, uint64_t bytes) {
  base::MutexLock lock(&mu_);
  s->size += bytes;
}

void PowerLossFileSystem::Truncated(SyncState* s, uint64_t size) {
  base::MutexLock lock(&mu_);
  s->size = size;
  s->synced_size = std::min(s->synced_size, size);
}

uint64_t PowerLossFileSystem::SizeOf(const SyncState* s) {
  base::MutexLock lock(&mu_);
  return s->size;
}

void PowerLossFileSystem::Synced(SyncState* s, uint64_t size) {
  base::MutexLock lock(&mu_);
  s->synced_size = std::max(s->synced_size, std::min(size, s->size));
}

uint64_t PowerLossFileSystem::OpenDir(const std::string& path) {
  base::MutexLock lock(&mu_);
  open_dirs_[++next_dir_id_] = path;
  return next_dir_id_;
}

void PowerLossFileSystem::CloseDir(uint64_t id) {
  base::MutexLock lock(&mu_);
  open_dirs_.erase(id);
}

uint64_t PowerLossFileSystem::NextSeq() {
  base::MutexLock lock(&mu_);
  return next_seq_;
}

void PowerLossFileSystem::DirSynced(uint64_t id, uint64_t seq) {
  base::MutexLock lock(&mu_);
  auto it = open_dirs_.find(id);
  if (it == open_dirs_.end()) return;
  const std::string& dir = it->second;
  std::erase_if(changes_, [&](const Change& c) { return c.seq < seq && ParentOf(c.path) == dir; });
}

// Names: renames, links, deletes.

IOStatus PowerLossFileSystem::RenameFile(const std::string& from, const std::string& to,
                                         const IOOptions& o, IODebugContext* g) {
  IOStatus s = Tick(from);
  if (!s.ok()) return s;
  base::MutexLock lock(&mu_);
  return RenameLocked(from, to, [&] { return target()->RenameFile(from, to, o, g); });
}

IOStatus PowerLossFileSystem::RenameLocked(const std::string& from, const std::string& to,
                                           const std::function<IOStatus()>& rename) {
  const std::string src = NormalizePath(from);
  const std::string dst = NormalizePath(to);
  bool src_is_dir = false;
  (void)target()->IsDirectory(src, IOOptions(), &src_is_dir, nullptr);
  Change c{.kind = Change::Kind::kRename, .path = dst, .from = src};
  if (!src_is_dir && ExistsLocked(dst)) {
    c.replaced = true;
    IOStatus s = SyncedContentLocked(dst, &c.replaced_content);
    if (!s.ok()) return s;
  }
  IOStatus s = rename();
  if (!s.ok()) return s;
  files_.erase(dst);  // the replaced file
  RebaseLocked(src, dst, changes_.size());
  AddChangeLocked(std::move(c));
  return s;
}

IOStatus PowerLossFileSystem::LinkFile(const std::string& from, const std::string& to,
                                       const IOOptions& o, IODebugContext* g) {
  IOStatus s = Tick(from);
  if (!s.ok()) return s;
  const std::string src = NormalizePath(from);
  const std::string dst = NormalizePath(to);
  base::MutexLock lock(&mu_);
  s = target()->LinkFile(from, to, o, g);
  if (!s.ok()) return s;
  if (auto it = files_.find(src); it != files_.end()) files_[dst] = it->second;
  AddChangeLocked({.kind = Change::Kind::kCreate, .path = dst});
  return s;
}

IOStatus PowerLossFileSystem::DeleteFile(const std::string& f, const IOOptions& o,
                                         IODebugContext* g) {
  return Remove(f, /*with_children=*/false, [&] { return target()->DeleteFile(f, o, g); });
}

IOStatus PowerLossFileSystem::DeleteDir(const std::string& d, const IOOptions& o,
                                        IODebugContext* g) {
  return Remove(d, /*with_children=*/true, [&] { return target()->DeleteDir(d, o, g); });
}

IOStatus PowerLossFileSystem::Remove(const std::string& path, bool with_children,
                                     const std::function<IOStatus()>& remove) {
  return Counted(path, [&] {
    base::MutexLock lock(&mu_);
    IOStatus s = remove();
    if (s.ok()) ForgetLocked(NormalizePath(path), with_children);
    return s;
  });
}

IOStatus PowerLossFileSystem::Truncate(const std::string& f, size_t size, const IOOptions& o,
                                       IODebugContext* g) {
  IOStatus s = Counted(f, [&] { return target()->Truncate(f, size, o, g); });
  if (!s.ok()) return s;
  std::shared_ptr<SyncState> state;
  {
    base::MutexLock lock(&mu_);
    if (auto it = files_.find(NormalizePath(f)); it != files_.end()) state = it->second;
  }
  if (state != nullptr) Truncated(state.get(), size);
  return s;
}

IOStatus PowerLossFileSystem::OpenTracked(const std::string& f, bool truncate,
                                          std::shared_ptr<SyncState>* state,
                                          const std::function<IOStatus()>& open) {
  const std::string path = NormalizePath(f);
  base::MutexLock lock(&mu_);
  const bool existed = ExistsLocked(path);
  uint64_t size = 0;  // an existing file's content counts as synced
  IOStatus s;
  if (existed && !truncate) s = target()->GetFileSize(path, IOOptions(), &size, nullptr);
  if (s.ok()) s = open();
  if (!s.ok()) return s;
  *state = TrackLocked(path, size);
  if (truncate) (*state)->size = (*state)->synced_size = 0;  // O_TRUNC: durable at once
  if (!existed) AddChangeLocked({.kind = Change::Kind::kCreate, .path = path});
  return s;
}

// The model.

bool PowerLossFileSystem::ExistsLocked(const std::string& path) {
  return target()->FileExists(path, IOOptions(), nullptr).ok();
}

std::shared_ptr<SyncState> PowerLossFileSystem::TrackLocked(const std::string& path,
                                                            uint64_t size) {
  std::shared_ptr<SyncState>& state = files_[path];
  if (state == nullptr) state = std::make_shared<SyncState>(SyncState{size, size});
  return state;
}

void PowerLossFileSystem::AddChangeLocked(Change c) {
  c.seq = next_seq_++;
  changes_.push_back(std::move(c));
}

void PowerLossFileSystem::ForgetLocked(const std::string& path, bool with_children) {
  auto gone = [&](const std::string& p) {
    return p == path || (with_children && StrictlyUnder(p, path));
  };
  std::erase_if(files_, [&](const auto& entry) { return gone(entry.first); });
  std::erase_if(changes_, [&](const Change& c) { return gone(c.path); });
}

void PowerLossFileSystem::RebaseLocked(const std::string& from, const std::string& to,
                                       size_t changes_end) {
  std::vector<std::pair<std::string, std::shared_ptr<SyncState>>> moved;
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->first == from || StrictlyUnder(it->first, from)) {
      moved.emplace_back(Rebase(it->first, from, to), std::move(it->second));
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [path, state] : moved) files_[path] = std::move(state);
  // A change inside a renamed directory moves with it; a change that made
  // the old name itself stays (undoing it comes after undoing the rename).
  for (size_t i = 0; i < changes_end; ++i) {
    Change& c = changes_[i];
    if (StrictlyUnder(c.path, from)) c.path = Rebase(c.path, from, to);
    if (StrictlyUnder(c.from, from)) c.from = Rebase(c.from, from, to);
  }
  for (auto& [id, path] : open_dirs_) path = Rebase(path, from, to);
}

IOStatus PowerLossFileSystem::SyncedContentLocked(const std::string& path, std::string* content) {
  std::unique_ptr<rocksdb::FSSequentialFile> file;
  IOStatus s = target()->NewSequentialFile(path, FileOptions(), &file, nullptr);
  std::string buffer(1 << 16, '\0');
  content->clear();
  while (s.ok()) {
    Slice read;
    s = file->Read(buffer.size(), IOOptions(), &read, buffer.data(), nullptr);
    if (!s.ok() || read.empty()) break;
    content->append(read.data(), read.size());
  }
  if (auto it = files_.find(path); it != files_.end()) {
    content->resize(std::min<uint64_t>(content->size(), it->second->synced_size));
  }
  return s;
}

IOStatus PowerLossFileSystem::RemoveAllLocked(const std::string& path) {
  bool is_dir = false;
  IOStatus s = target()->IsDirectory(path, IOOptions(), &is_dir, nullptr);
  if (s.IsNotFound() || s.IsPathNotFound()) return IOStatus::OK();
  if (!s.ok()) return s;
  files_.erase(path);
  if (!is_dir) return target()->DeleteFile(path, IOOptions(), nullptr);
  std::vector<std::string> children;
  s = target()->GetChildren(path, IOOptions(), &children, nullptr);
  for (const std::string& c : children) {
    if (!s.ok()) break;
    if (c != "." && c != "..") s = RemoveAllLocked(path + "/" + c);
  }
  return s.ok() ? target()->DeleteDir(path, IOOptions(), nullptr) : s;
}

// FileSystem::Truncate is not supported by the POSIX file system; its files are.
IOStatus PowerLossFileSystem::TruncateLocked(const std::string& path, uint64_t size) {
  std::unique_ptr<rocksdb::FSWritableFile> file;
  IOStatus s = target()->ReopenWritableFile(path, FileOptions(), &file, nullptr);
  if (s.ok()) s = file->Truncate(size, IOOptions(), nullptr);
  if (s.ok()) s = file->Close(IOOptions(), nullptr);
  return s;
}

IOStatus PowerLossFileSystem::UndoLocked(const Change& c, size_t index) {
  if (c.kind == Change::Kind::kCreate) return RemoveAllLocked(c.path);
  IOStatus s = target()->RenameFile(c.path, c.from, IOOptions(), nullptr);
  if (s.IsNotFound() || s.IsPathNotFound()) return IOStatus::OK();  // deleted since
  if (!s.ok()) return s;
  RebaseLocked(c.path, c.from, index);
  if (!c.replaced) return s;
  std::unique_ptr<rocksdb::FSWritableFile> file;
  s = target()->NewWritableFile(c.path, FileOptions(), &file, nullptr);
  if (s.ok()) s = file->Append(c.replaced_content, IOOptions(), nullptr);
  if (s.ok()) s = file->Close(IOOptions(), nullptr);
  return s;
}

Status PowerLossFileSystem::DropUnsyncedData() {
  base::MutexLock lock(&mu_);
  Status first;
  auto note = [&](const IOStatus& s, const std::string& path) {
    if (!s.ok() && first.ok()) {
      first = Status::IOError("power loss at " + path + ": " + s.ToString());
    }
  };
  for (const auto& [path, state] : files_) {
    uint64_t size = 0;
    if (!ExistsLocked(path)) continue;
    IOStatus s = target()->GetFileSize(path, IOOptions(), &size, nullptr);
    if (s.ok() && size > state->synced_size) s = TruncateLocked(path, state->synced_size);
    note(s, path);
  }
  for (size_t i = changes_.size(); i-- > 0;) note(UndoLocked(changes_[i], i), changes_[i].path);
  changes_.clear();
  for (auto& [path, state] : files_) state->size = state->synced_size;
  cut_at_.store(0, std::memory_order_relaxed);
  return first;
}

}  // namespace strata::storage::testing
