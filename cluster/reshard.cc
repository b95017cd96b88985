// Reshard (reshard.h).
#include "cluster/reshard.h"

#include <cstring>
#include <memory>

#include "cluster/manifest.h"
#include "io/env.h"
#include "kernels/optimizer.h"
#include "storage/ssd/row_store_factory.h"
#include "strata/cluster_owner.h"

namespace strata::cluster {
namespace {

// Rows buffered per new shard and table before one MultiPut.
constexpr size_t kPutRowsMax = 4096;

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

storage::RowStoreOptions RowStoreAt(const ClusterManifest& m, const std::string& dir) {
  storage::RowStoreOptions o;
  o.backend = m.ssd_backend;
  o.dir = dir;
  return o;
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
  STRATA_ASSIGN_OR_RETURN(ClusterManifest m, ReadManifest(env, from));
  STRATA_RETURN_IF_ERROR(CheckOut(env, out));
  std::vector<storage::TableSpec> specs;
  for (size_t i = 0; i < m.tables.size(); ++i) {
    const ManifestTable& t = m.tables[i];
    const uint32_t floats = t.dim + kernels::StateFloats(t.optimizer, t.dim);
    specs.push_back({static_cast<TableId>(i), t.name, floats * uint32_t{sizeof(float)}});
  }
  ReshardReport report;
  report.from_ranks = m.world_size;
  report.to_ranks = ranks;
  report.generation = m.generation;
  report.rows_per_rank.assign(ranks, 0);

  std::vector<std::unique_ptr<storage::RowStore>> shards;
  for (uint32_t q = 0; q < ranks; ++q) {
    STRATA_RETURN_IF_ERROR(env->CreateDirs(RowStoreDir(out, q)));
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
