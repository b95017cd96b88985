// RocksDB backend: the files under dir/ (docs/ssd-format.md, "RocksDB
// backend"). The CHECKPOINT pointer is parsed strictly and replaced
// atomically; a directory holding checkpoint data without it is refused, not
// taken for a new store; directories are created with their parents, each
// new entry fsynced; obsolete checkpoints are deleted only behind a durable
// pointer, and a failure to delete them never fails the checkpoint.
#include "base/log.h"
#include "storage/ssd/limits.h"
#include "storage/ssd/rocksdb_store.h"

namespace strata::storage::rocks {
namespace {

// `text` for a message: its first 32 bytes, anything but printable ASCII
// written as \xNN.
std::string Printable(const std::string& text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size() && i < 32; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    }
  }
  if (text.size() > 32) out += "...";
  return out;
}

// n of "ckpt-<n>\n": 1 to 19 decimal digits (below 10^19, so no overflow),
// no leading zero, n >= 1. 0 when `text` is anything else.
uint64_t ParsePointer(const std::string& text) {
  const size_t prefix = sizeof(kCheckpointPrefix) - 1;
  if (text.size() < prefix + 2 || text.compare(0, prefix, kCheckpointPrefix) != 0 ||
      text.back() != '\n') {
    return 0;
  }
  const size_t digits = text.size() - prefix - 1;
  if (digits > 19 || text[prefix] == '0') return 0;
  uint64_t n = 0;
  for (size_t i = prefix; i < prefix + digits; ++i) {
    if (text[i] < '0' || text[i] > '9') return 0;
    n = n * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  return n;
}

std::string StripTrailingSlashes(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// The directory holding `path` ("." for a relative name without a slash).
std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return StripTrailingSlashes(path.substr(0, slash));
}

}  // namespace

Status SyncDir(rocksdb::Env* env, const std::string& dir) {
  std::unique_ptr<rocksdb::Directory> d;
  STRATA_RETURN_IF_ERROR(FromRocks(env->NewDirectory(dir, &d), "open of directory " + dir));
  return FromRocks(d->Fsync(), "fsync of directory " + dir);
}

Status CreateDirsSynced(rocksdb::Env* env, const std::string& path) {
  std::vector<std::string> missing;  // innermost first
  for (std::string p = StripTrailingSlashes(path); p != "/" && p != ".";) {
    rocksdb::Status exists = env->FileExists(p);
    if (exists.ok()) break;
    if (!exists.IsNotFound()) return FromRocks(exists, "stat of " + p);
    missing.push_back(p);
    p = Parent(p);  // shorter each time: the loop ends
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    STRATA_RETURN_IF_ERROR(FromRocks(env->CreateDirIfMissing(*it), "mkdir of " + *it));
    STRATA_RETURN_IF_ERROR(SyncDir(env, Parent(*it)));
  }
  // Levels that existed are synced too: an earlier open may have created one
  // and died before its fsync.
  const size_t created = missing.size();
  std::string level = StripTrailingSlashes(path);
  for (size_t skip = 0; level != "/" && level != "."; level = Parent(level), ++skip) {
    if (skip >= created) STRATA_RETURN_IF_ERROR(SyncDir(env, Parent(level)));
  }
  bool is_dir = false;
  STRATA_RETURN_IF_ERROR(FromRocks(env->IsDirectory(path, &is_dir), "stat of " + path));
  if (!is_dir) return Status::InvalidArgument(path + " exists and is not a directory");
  return Status::Ok();
}

Result<uint64_t> RocksDbRowStore::ReadPointer() const {
  const std::string path = PointerPath();
  std::unique_ptr<rocksdb::SequentialFile> file;
  rocksdb::Status s = env_->NewSequentialFile(path, &file, rocksdb::EnvOptions());
  if (s.IsNotFound() || s.IsPathNotFound()) return uint64_t{0};
  STRATA_RETURN_IF_ERROR(FromRocks(s, path));
  // One byte more than the limit tells a longer file without reading it whole.
  char buf[kCheckpointPointerBytesMax + 1];
  rocksdb::Slice got;
  STRATA_RETURN_IF_ERROR(FromRocks(file->Read(sizeof(buf), &got, buf), path));
  const std::string text = got.ToString();
  if (text.size() > kCheckpointPointerBytesMax) {
    return Status::Corruption(path + " is longer than kCheckpointPointerBytesMax (" +
                              std::to_string(kCheckpointPointerBytesMax) + " bytes), holding '" +
                              Printable(text) + "': not a checkpoint pointer");
  }
  const uint64_t gen = ParsePointer(text);
  if (gen == 0) {
    return Status::Corruption(path + " holds '" + Printable(text) +
                              "', not \"ckpt-<n>\\n\" with n a decimal number >= 1 below 10^19");
  }
  return gen;
}

Status RocksDbRowStore::WritePointer(uint64_t gen, bool* maybe_switched) {
  const std::string path = PointerPath();
  const std::string text = kCheckpointPrefix + std::to_string(gen) + "\n";
  STRATA_RETURN_IF_ERROR(
      FromRocks(rocksdb::WriteStringToFile(env_, text, path + ".tmp", /*should_sync=*/true), path));
  *maybe_switched = true;  // a failed rename may have happened all the same
  STRATA_RETURN_IF_ERROR(FromRocks(env_->RenameFile(path + ".tmp", path), path));
  return SyncDir(env_, options_.dir);
}

Status RocksDbRowStore::CheckNoDataWithoutPointer(const std::vector<std::string>& children) const {
  std::string found;
  int listed = 0;
  for (const std::string& c : children) {
    if (c != "live" && c.rfind(kCheckpointPrefix, 0) != 0) continue;
    if (++listed > 8) {
      found += ", ...";
      break;
    }
    found += (found.empty() ? "" : ", ") + c + "/";
  }
  if (found.empty()) return Status::Ok();
  return Status::Corruption(PointerPath() + " is missing, but " + options_.dir + " holds " + found +
                            ": not a new store; refusing to open it (write \"ckpt-<n>\\n\" "
                            "naming its last checkpoint into CHECKPOINT to recover)");
}

Status RocksDbRowStore::RemoveDir(const std::string& dir) {
  if (!env_->FileExists(dir).ok()) return Status::Ok();
  std::vector<std::string> children;
  STRATA_RETURN_IF_ERROR(FromRocks(env_->GetChildren(dir, &children), dir));
  for (const std::string& c : children) {
    if (c == "." || c == "..") continue;
    STRATA_RETURN_IF_ERROR(FromRocks(env_->DeleteFile(dir + "/" + c), dir + "/" + c));
  }
  return FromRocks(env_->DeleteDir(dir), dir);
}

void RocksDbRowStore::RemoveObsoleteCheckpoints() {
  std::vector<std::string> children;
  rocksdb::Status listed = env_->GetChildren(options_.dir, &children);
  if (!listed.ok()) return NoteCleanupError(FromRocks(listed, "list of " + options_.dir));
  const std::string current = kCheckpointPrefix + std::to_string(generation_);
  for (const std::string& c : children) {
    if (c.rfind(kCheckpointPrefix, 0) != 0 || c == current) continue;
    Status s = RemoveDir(options_.dir + "/" + c);
    if (!s.ok()) NoteCleanupError(s);
  }
}

void RocksDbRowStore::NoteCleanupError(const Status& s) {
  ++cleanup_errors_;
  if (!cleanup_error_logged_.exchange(true)) {
    STRATA_LOG_WARN(
        "%s: obsolete checkpoints not deleted (the last checkpoint is durable; retried at the "
        "next checkpoint or open; further errors only counted in Stats().cleanup_errors): %s",
        options_.dir.c_str(), s.ToString().c_str());
  }
}

}  // namespace strata::storage::rocks
