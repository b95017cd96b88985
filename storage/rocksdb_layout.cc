// RocksDB backend: the files under dir/ (docs/ssd-format.md, "RocksDB
// backend"): directories are created with their parents, each new entry
// fsynced in its parent.
#include "storage/rocksdb_store.h"

namespace strata::storage::rocks {
namespace {

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
  bool is_dir = false;
  STRATA_RETURN_IF_ERROR(FromRocks(env->IsDirectory(path, &is_dir), "stat of " + path));
  if (!is_dir) return Status::InvalidArgument(path + " exists and is not a directory");
  return Status::Ok();
}

}  // namespace strata::storage::rocks
