// Reshard (reshard.h).
#include "cluster/reshard.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/paths.h"
#include "cluster/manifest.h"
#include "engine/limits.h"
#include "io/env.h"
#include "kernels/optimizer.h"
#include "storage/ssd/row_store_factory.h"
#include "strata/cluster_owner.h"

namespace strata::cluster {
namespace {

// Rows buffered per new shard and table before one MultiPut.
constexpr size_t kPutRowsMax = 4096;
// Open files the reshard leaves to the rest of the process (standard streams,
// the io_uring, what the allocator or a library opens) beyond its stores.
constexpr uint64_t kSpareFilesMin = 64;
// The files a new shard's row store holds, against what an empty one holds:
// room for those it opens as it fills (log segments, RocksDB's tables).
constexpr uint64_t kShardFilesGrowth = 2;

// Where a Store keeps its SSD tier's row store inside its directory
// (engine/store_open.cc).
std::string RowStoreDir(const std::string& dir, uint32_t rank) {
  return ShardDir(dir, rank) + "/ssd";
}

// The rows bound for one new shard, of the table being moved.
struct Outbox {
  std::vector<Key> keys;
  std::vector<std::byte> rows;
};

Result<ClusterManifest> ReadManifest(io::Env* env, const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> text, ReadSmallFile(env, dir, kManifestName));
  const std::string path = dir + "/" + kManifestName;
  if (!text.has_value()) {
    return Status::FailedPrecondition(path +
                                      " does not exist: reshard takes a checkpointed cluster");
  }
  STRATA_ASSIGN_OR_RETURN(ClusterManifest m, DecodeClusterManifest(*text, path));
  if (m.version < 2) {
    return Status::FailedPrecondition(
        path + " is version " + std::to_string(m.version) +
        ", which does not name the tables: reopen the cluster and checkpoint it once");
  }
  if (m.ownership != kClusterOwnershipName) {
    return Status::InvalidArgument(path + ": ownership function '" + m.ownership +
                                   "', this build places rows by '" + kClusterOwnershipName + "'");
  }
  for (uint32_t r = 0; r < m.world_size; ++r) {
    const std::string shard = ShardDir(dir, r);
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> rec,
                            ReadSmallFile(env, shard, kShardRecordName));
    if (!rec.has_value()) {
      return Status::FailedPrecondition(shard + "/" + kShardRecordName + " does not exist");
    }
    STRATA_ASSIGN_OR_RETURN(ShardRecord record,
                            DecodeShardRecord(*rec, shard + "/" + kShardRecordName));
    if (record.rank != r || record.generation != m.rank_generations[r] ||
        record.pending != record.generation) {
      return Status::FailedPrecondition(
          shard + " holds rank " + std::to_string(record.rank) + "'s shard at generation " +
          std::to_string(record.generation) + " (pending " + std::to_string(record.pending) +
          "), the manifest rank " + std::to_string(r) + " at " +
          std::to_string(m.rank_generations[r]) +
          ": open the cluster once (it recovers an interrupted checkpoint), then reshard");
    }
  }
  return m;
}

Status CheckOut(io::Env* env, const std::string& out) {
  if (!env->FileExists(out)) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> entries, env->ListDir(out));
  if (!entries.empty()) {
    return Status::InvalidArgument("--out " + out +
                                   " is not empty; reshard writes a new directory");
  }
  return Status::Ok();
}

// The new directory may be neither the old one nor inside it (the new shards
// would be written among the old, and the old directory would no longer be
// a cluster's). Compared resolved (base/paths.h): links and ".." included.
Status CheckOutBesideFrom(const std::string& from, const std::string& out) {
  STRATA_ASSIGN_OR_RETURN(const bool same, base::SameFile(out, from));
  if (same) return Status::InvalidArgument("--out " + out + " is --from " + from);
  STRATA_ASSIGN_OR_RETURN(const bool inside, base::SameOrInside(out, from));
  if (inside) return Status::InvalidArgument("--out " + out + " lies inside --from " + from);
  return Status::Ok();
}

storage::RowStoreOptions RowStoreAt(const ClusterManifest& m, const std::string& dir) {
  storage::RowStoreOptions o;
  o.backend = m.ssd_backend;
  o.dir = dir;
  return o;
}

// Files this process has open now (the entries of /proc/self/fd, less the
// one listing them).
Result<uint64_t> OpenFileCount() {
  std::error_code ec;
  uint64_t count = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++count;
  }
  if (ec) return Status::FromErrno(ec.value(), "list /proc/self/fd");
  return count > 0 ? count - 1 : 0;
}

// Files one row store of `specs` holds open, counted on an empty one made in
// a temporary directory (removed after).
Result<uint64_t> ShardFiles(const ClusterManifest& m,
                            const std::vector<storage::TableSpec>& specs) {
  std::string dir = (std::filesystem::temp_directory_path() / "strata-reshard-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) return Status::FromErrno(errno, "mkdtemp " + dir);
  Result<uint64_t> files = [&]() -> Result<uint64_t> {
    STRATA_ASSIGN_OR_RETURN(const uint64_t before, OpenFileCount());
    STRATA_ASSIGN_OR_RETURN(auto store, storage::OpenRowStore(RowStoreAt(m, dir), specs));
    STRATA_ASSIGN_OR_RETURN(const uint64_t after, OpenFileCount());
    return std::max<uint64_t>(after - std::min(after, before), 1);
  }();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return files;
}

// InvalidArgument unless `ranks` new shards fit the process's open-file
// limit: Reshard holds every new shard's row store open at once, with one
// old shard's, each some files per table.
Status CheckRanksFit(uint32_t ranks, const ClusterManifest& m,
                     const std::vector<storage::TableSpec>& specs) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return Status::FromErrno(errno, "getrlimit");
  if (limit.rlim_cur == RLIM_INFINITY) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(const uint64_t shard_files, ShardFiles(m, specs));
  STRATA_ASSIGN_OR_RETURN(const uint64_t in_use, OpenFileCount());
  // A new shard's files and its lock; one old shard's files and every old
  // shard's two locks.
  const uint64_t per_shard = shard_files * kShardFilesGrowth + 1;
  const uint64_t reserved = in_use + per_shard + 2 * uint64_t{m.world_size} + kSpareFilesMin;
  const uint64_t fit = limit.rlim_cur > reserved ? (limit.rlim_cur - reserved) / per_shard : 0;
  if (ranks <= fit) return Status::Ok();
  return Status::InvalidArgument(
      "--ranks " + std::to_string(ranks) + ": reshard holds every new shard open at once, about " +
      std::to_string(per_shard) + " files each (" + std::to_string(specs.size()) +
      " tables), and this process may open " + std::to_string(limit.rlim_cur) +
      " files (ulimit -n): at most " + std::to_string(fit) + " ranks here");
}

// Takes `path`'s lock for the reshard: Unavailable naming `what` while a
// cluster or a Store has it.
Status Lock(io::Env* env, const std::string& path, const std::string& what,
            std::vector<std::unique_ptr<io::FileLock>>* held) {
  Result<std::unique_ptr<io::FileLock>> lock = env->LockFile(path);
  if (!lock.ok()) {
    if (!lock.status().IsUnavailable()) return lock.status();
    return Status::Unavailable("reshard: " + what + " is in use (" + lock.status().message() +
                               "); close the cluster first");
  }
  held->push_back(std::move(lock).value());
  return Status::Ok();
}

// Every shard of the cluster in `dir` locked as its rank's Cluster::Open and
// its Store lock them (dir/rank-<r>.LOCK, dir/rank-<r>/LOCK), so that no
// cluster recovers, opens or checkpoints a shard while it is read (opening a
// RocksDB tier rebuilds its live copy) or written.
Status LockShards(io::Env* env, const std::string& dir, uint32_t ranks,
                  std::vector<std::unique_ptr<io::FileLock>>* held) {
  for (uint32_t r = 0; r < ranks; ++r) {
    const std::string shard = ShardDir(dir, r);
    if (!env->FileExists(shard)) {
      return Status::FailedPrecondition(shard + " does not exist: not a shard of a cluster");
    }
    STRATA_RETURN_IF_ERROR(
        Lock(env, shard + ".LOCK", "rank " + std::to_string(r) + " of " + dir, held));
    STRATA_RETURN_IF_ERROR(Lock(env, shard + "/" + engine::kLockFileName, shard, held));
  }
  return Status::Ok();
}

Status Flush(storage::RowStore& store, TableId table, Outbox* box) {
  if (box->keys.empty()) return Status::Ok();
  STRATA_RETURN_IF_ERROR(store.MultiPut(table, box->keys, box->rows));
  box->keys.clear();
  box->rows.clear();
  return Status::Ok();
}

}  // namespace

Result<ReshardReport> Reshard(const std::string& from, uint32_t ranks, const std::string& out) {
  io::Env* env = io::Env::Default();
  if (ranks == 0 || ranks > kWorldSizeMax) {
    return Status::InvalidArgument("--ranks " + std::to_string(ranks) + ": from 1 to " +
                                   std::to_string(kWorldSizeMax));
  }
  STRATA_RETURN_IF_ERROR(CheckOutBesideFrom(from, out));
  STRATA_ASSIGN_OR_RETURN(ClusterManifest m, ReadManifest(env, from));
  STRATA_RETURN_IF_ERROR(CheckOut(env, out));
  // The shards locked, then the manifest read again: a cluster that
  // checkpointed before the locks were taken has finished with it.
  std::vector<std::unique_ptr<io::FileLock>> locks;
  STRATA_RETURN_IF_ERROR(LockShards(env, from, m.world_size, &locks));
  STRATA_ASSIGN_OR_RETURN(m, ReadManifest(env, from));
  std::vector<storage::TableSpec> specs;
  for (size_t i = 0; i < m.tables.size(); ++i) {
    const ManifestTable& t = m.tables[i];
    const uint32_t floats = t.dim + kernels::StateFloats(t.optimizer, t.dim);
    specs.push_back({static_cast<TableId>(i), t.name, floats * uint32_t{sizeof(float)}});
  }
  STRATA_RETURN_IF_ERROR(CheckRanksFit(ranks, m, specs));
  ReshardReport report;
  report.from_ranks = m.world_size;
  report.to_ranks = ranks;
  report.generation = m.generation;
  report.rows_per_rank.assign(ranks, 0);

  std::vector<std::unique_ptr<storage::RowStore>> shards;
  for (uint32_t q = 0; q < ranks; ++q) {
    STRATA_RETURN_IF_ERROR(env->CreateDirs(RowStoreDir(out, q)));
    STRATA_RETURN_IF_ERROR(
        Lock(env, ShardDir(out, q) + "/" + engine::kLockFileName, ShardDir(out, q), &locks));
    STRATA_ASSIGN_OR_RETURN(auto store,
                            storage::OpenRowStore(RowStoreAt(m, RowStoreDir(out, q)), specs));
    shards.push_back(std::move(store));
  }
  std::vector<std::byte> meta;
  std::vector<Outbox> boxes(ranks);
  for (uint32_t r = 0; r < m.world_size; ++r) {
    const std::string dir = RowStoreDir(from, r);
    if (!env->FileExists(dir)) {
      return Status::FailedPrecondition(dir + " does not exist: not a shard's SSD tier");
    }
    STRATA_ASSIGN_OR_RETURN(auto old, storage::OpenRowStore(RowStoreAt(m, dir), specs));
    const std::vector<std::byte> old_meta = old->CheckpointMeta();
    if (r == 0) meta = old_meta;
    if (old_meta != meta) {
      return Status::Corruption(dir + ": its checkpoint's tables and clocks differ from rank 0's");
    }
    for (const storage::TableSpec& spec : specs) {
      Status moved = old->Scan(spec.id, [&](Key key, std::span<const std::byte> row) -> Status {
        if (row.size() != spec.row_bytes) {
          return Status::Corruption(dir + ": table '" + spec.name + "' key " + std::to_string(key) +
                                    " has a row of " + std::to_string(row.size()) + " bytes, not " +
                                    std::to_string(spec.row_bytes));
        }
        const uint32_t q = ClusterOwner(spec.id, key, ranks);
        Outbox& box = boxes[q];
        box.keys.push_back(key);
        box.rows.insert(box.rows.end(), row.begin(), row.end());
        report.rows_per_rank[q]++;
        report.rows++;
        return box.keys.size() >= kPutRowsMax ? Flush(*shards[q], spec.id, &box) : Status::Ok();
      });
      STRATA_RETURN_IF_ERROR(
          moved.WithContext("reshard: moving table '" + spec.name + "' of " + dir));
      for (uint32_t q = 0; q < ranks; ++q) {
        STRATA_RETURN_IF_ERROR(Flush(*shards[q], spec.id, &boxes[q]));
      }
    }
  }
  for (uint32_t q = 0; q < ranks; ++q) {
    STRATA_RETURN_IF_ERROR(shards[q]->Checkpoint(meta).WithContext("reshard: " + ShardDir(out, q)));
    shards[q].reset();
    ShardRecord record;
    record.rank = q;
    record.world_size = ranks;
    record.generation = m.generation;
    record.pending = m.generation;
    STRATA_RETURN_IF_ERROR(env->WriteFileAtomically(ShardDir(out, q), kShardRecordName,
                                                    std::string(kShardRecordName) + ".tmp",
                                                    EncodeShardRecord(record)));
  }
  ClusterManifest next = m;
  next.version = kManifestVersion;
  next.world_size = ranks;
  next.rank_generations.assign(ranks, m.generation);
  STRATA_RETURN_IF_ERROR(env->WriteFileAtomically(
      out, kManifestName, std::string(kManifestName) + ".tmp", EncodeClusterManifest(next)));
  return report;
}

}  // namespace strata::cluster
