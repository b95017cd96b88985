// The shard's previous checkpoint (shard_backup.h).
#include "cluster/shard_backup.h"

#include <filesystem>
#include <vector>

#include "cluster/manifest.h"

namespace strata::cluster {
namespace {

namespace fs = std::filesystem;

// Bytes per read and write of a copied file.
constexpr size_t kCopyChunkBytes = size_t{1} << 20;

std::string DiscardDir(const std::string& dir, uint32_t rank) {
  return ShardDir(dir, rank) + ".discard";
}

bool Skipped(const std::string& name) {
  return name == "live" || name == kBackupMarkerName ||
         (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0);
}

Status CopyFile(io::Env* env, const std::string& from, const std::string& to,
                std::vector<char>* buf) {
  io::FileOptions read;
  read.read_only = true;
  STRATA_ASSIGN_OR_RETURN(auto in, env->OpenFile(from, read));
  io::FileOptions write;
  write.create = true;
  write.truncate = true;
  STRATA_ASSIGN_OR_RETURN(auto out, env->OpenFile(to, write));
  STRATA_ASSIGN_OR_RETURN(uint64_t size, in->Size());
  for (uint64_t at = 0; at < size;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kCopyChunkBytes, size - at));
    size_t got = 0;
    STRATA_RETURN_IF_ERROR(in->Read(at, want, buf->data(), &got));
    if (got == 0) return Status::IOError(from + ": short read at offset " + std::to_string(at));
    STRATA_RETURN_IF_ERROR(out->Write(at, buf->data(), got));
    at += got;
  }
  return out->Sync();
}

// Copies the tree under `from` into the new directory `to`, each file and
// directory fsynced.
Status CopyTree(io::Env* env, const std::string& from, const std::string& to,
                std::vector<char>* buf) {
  STRATA_ASSIGN_OR_RETURN(bool created, env->CreateDir(to));
  (void)created;
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(from));
  for (const std::string& name : names) {
    if (Skipped(name)) continue;
    const std::string src = from + "/" + name;
    std::error_code ec;
    if (fs::is_directory(src, ec)) {
      STRATA_RETURN_IF_ERROR(CopyTree(env, src, to + "/" + name, buf));
    } else if (fs::is_regular_file(src, ec)) {
      STRATA_RETURN_IF_ERROR(CopyFile(env, src, to + "/" + name, buf));
    }
  }
  return env->SyncDir(to);
}

Status RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return Status::IOError("deleting " + path + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

std::string BackupDir(const std::string& dir, uint32_t rank) {
  return ShardDir(dir, rank) + ".prev";
}

Result<std::optional<uint64_t>> BackupGeneration(io::Env* env, const std::string& dir,
                                                 uint32_t rank) {
  const std::string backup = BackupDir(dir, rank);
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> text,
                          ReadSmallFile(env, backup, kBackupMarkerName));
  if (!text.has_value()) return std::optional<uint64_t>();
  STRATA_ASSIGN_OR_RETURN(ShardRecord marker,
                          DecodeShardRecord(*text, backup + "/" + kBackupMarkerName));
  if (marker.rank != rank) {
    return Status::Corruption(backup + "/" + kBackupMarkerName + " names rank " +
                              std::to_string(marker.rank));
  }
  return std::optional<uint64_t>(marker.generation);
}

Status BackupShard(io::Env* env, const std::string& dir, uint32_t rank, uint32_t world_size,
                   uint64_t generation) {
  STRATA_ASSIGN_OR_RETURN(std::optional<uint64_t> kept, BackupGeneration(env, dir, rank));
  if (kept == generation) return Status::Ok();
  const std::string backup = BackupDir(dir, rank);
  STRATA_RETURN_IF_ERROR(RemoveTree(backup));
  std::vector<char> buf(kCopyChunkBytes);
  STRATA_RETURN_IF_ERROR(CopyTree(env, ShardDir(dir, rank), backup, &buf));
  STRATA_RETURN_IF_ERROR(env->SyncDir(dir));
  ShardRecord marker;
  marker.rank = rank;
  marker.world_size = world_size;
  marker.generation = generation;
  marker.pending = generation;
  return env->WriteFileAtomically(backup, kBackupMarkerName,
                                  std::string(kBackupMarkerName) + ".tmp",
                                  EncodeShardRecord(marker));
}

Status RestoreShard(io::Env* env, const std::string& dir, uint32_t rank) {
  const std::string shard = ShardDir(dir, rank);
  const std::string discard = DiscardDir(dir, rank);
  STRATA_RETURN_IF_ERROR(RemoveTree(discard));
  if (env->FileExists(shard)) STRATA_RETURN_IF_ERROR(env->RenameFile(shard, discard));
  STRATA_RETURN_IF_ERROR(env->RenameFile(BackupDir(dir, rank), shard));
  STRATA_RETURN_IF_ERROR(env->SyncDir(dir));
  // The marker stays in the shard: harmless, and copies skip it.
  return RemoveTree(discard);
}

Status DropBackup(io::Env* env, const std::string& dir, uint32_t rank) {
  const std::string backup = BackupDir(dir, rank);
  if (!env->FileExists(backup)) return Status::Ok();
  // The marker first: a crash mid-delete leaves no backup that looks whole.
  const std::string marker = backup + "/" + kBackupMarkerName;
  if (env->FileExists(marker)) STRATA_RETURN_IF_ERROR(env->DeleteFile(marker));
  STRATA_RETURN_IF_ERROR(env->SyncDir(backup));
  return RemoveTree(backup);
}

Status FinishInterrupted(io::Env* env, const std::string& dir, uint32_t rank) {
  const std::string shard = ShardDir(dir, rank);
  if (!env->FileExists(shard) && env->FileExists(DiscardDir(dir, rank))) {
    STRATA_ASSIGN_OR_RETURN(std::optional<uint64_t> whole, BackupGeneration(env, dir, rank));
    if (!whole.has_value()) {
      return Status::Corruption(shard + " is missing and " + BackupDir(dir, rank) +
                                " is not a whole backup: a restore was interrupted "
                                "before the backup was complete (it never starts so)");
    }
    STRATA_RETURN_IF_ERROR(env->RenameFile(BackupDir(dir, rank), shard));
    STRATA_RETURN_IF_ERROR(env->SyncDir(dir));
  }
  return RemoveTree(DiscardDir(dir, rank));
}

}  // namespace strata::cluster
