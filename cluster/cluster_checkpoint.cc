// Cluster::Checkpoint and the roll-back at Open (docs/cluster.md,
// "Checkpoint and the cluster manifest"). Generation g + 1 of a cluster at g,
// every step agreed by all ranks before the next:
//   0. each rank keeps a copy of its shard at g (shard_backup.h), unless
//      ClusterOptions::keep_previous_checkpoint is off;
//   1. each rank records "generation g, pending g+1" in its CLUSTER_SHARD;
//   2. each rank checkpoints its shard (Store::Checkpoint);
//   3. each rank records "generation g+1" (nothing pending);
//   4. rank 0 writes CLUSTER: world size, ownership, g+1 for every rank,
//      the SSD backend and the tables;
//   5. each rank deletes its copy of g.
// A crash before 4 is durable leaves shards at g or past it: Open rolls every
// shard past the manifest's generation back to its copy (RecoverShard), so
// all reopen at g. A crash after leaves every shard at g+1 (and copies that
// Open deletes). A failure returned by any step fails the call on every
// rank; a retry redoes the steps for the same g + 1 and keeps the copy of g
// (the shard may already be past g).
#include <cstdio>

#include "cluster/cluster_impl.h"
#include "cluster/manifest.h"
#include "cluster/shard_backup.h"

namespace strata::cluster {

Status ClusterImpl::WriteShardRecord(uint64_t generation, uint64_t pending) {
  ShardRecord record;
  record.rank = static_cast<uint32_t>(rank());
  record.world_size = static_cast<uint32_t>(world_size());
  record.generation = generation;
  record.pending = pending;
  return env_->WriteFileAtomically(ShardDir(options_.store.dir, rank()), kShardRecordName,
                                   std::string(kShardRecordName) + ".tmp",
                                   EncodeShardRecord(record));
}

Status ClusterImpl::Checkpoint() {
  base::MutexLock lock(&collective_mu_);
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(CheckOpen()));
  const std::string& dir = options_.store.dir;
  const uint32_t me = static_cast<uint32_t>(rank());
  const uint64_t next = generation_ + 1;
  const std::string context = "Cluster::Checkpoint of generation " + std::to_string(next);
  if (options_.keep_previous_checkpoint) {
    STRATA_RETURN_IF_ERROR(
        comm_->AgreeOn(BackupShard(env_, dir, me, static_cast<uint32_t>(world_size()), generation_)
                           .WithContext(context + ": keeping a copy of generation " +
                                        std::to_string(generation_))));
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(WriteShardRecord(generation_, next).WithContext(context)));
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(shard_->Checkpoint().WithContext(context)));
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(WriteShardRecord(next, next).WithContext(context)));

  std::vector<uint64_t> generations(world_size());
  STRATA_RETURN_IF_ERROR(comm_->AllGather(&next, generations.data(), sizeof(next)));
  Status written = Status::Ok();
  if (rank() == 0) {
    ClusterManifest manifest;
    manifest.world_size = static_cast<uint32_t>(world_size());
    manifest.ownership = kClusterOwnershipName;
    manifest.generation = next;
    manifest.rank_generations = generations;
    manifest.ssd_backend = options_.store.ssd_backend;
    for (const TableOptions& t : tables_)
      manifest.tables.push_back({t.name, t.dim, t.optimizer.kind});
    written = env_->WriteFileAtomically(dir, kManifestName, std::string(kManifestName) + ".tmp",
                                        EncodeClusterManifest(manifest));
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(written.WithContext(context)));
  generation_ = next;
  // The checkpoint is durable: the copy of the previous one goes. A failure
  // here fails nothing; the copy is replaced at the next checkpoint, and
  // Open deletes it.
  const Status dropped = DropBackup(env_, dir, me);
  if (!dropped.ok()) {
    std::fprintf(stderr, "strata: %s: deleting the copy of the previous checkpoint: %s\n",
                 context.c_str(), dropped.ToString().c_str());
  }
  return Status::Ok();
}

Status ClusterImpl::RecoverShard(uint64_t want) {
  const std::string& dir = options_.store.dir;
  const uint32_t me = static_cast<uint32_t>(rank());
  STRATA_RETURN_IF_ERROR(FinishInterrupted(env_, dir, me));
  const std::string shard = ShardDir(dir, me);
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> text,
                          ReadSmallFile(env_, shard, kShardRecordName));
  ShardRecord record;  // a shard never checkpointed: generation 0
  if (text.has_value()) {
    STRATA_ASSIGN_OR_RETURN(record, DecodeShardRecord(*text, shard + "/" + kShardRecordName));
  }
  STRATA_ASSIGN_OR_RETURN(std::optional<uint64_t> kept, BackupGeneration(env_, dir, me));
  if (record.generation == want && record.pending == want) {
    // At the manifest's generation: a copy left is one a crash after the
    // manifest kept from being deleted.
    return kept.has_value() ? DropBackup(env_, dir, me) : Status::Ok();
  }
  const bool past =
      record.generation == want + 1 || (record.generation == want && record.pending == want + 1);
  if (past && kept == want) {
    std::fprintf(stderr,
                 "strata: Cluster::Open: %s was at generation %llu (pending %llu), the cluster "
                 "manifest at %llu: restoring its copy of generation %llu\n",
                 shard.c_str(), static_cast<unsigned long long>(record.generation),
                 static_cast<unsigned long long>(record.pending),
                 static_cast<unsigned long long>(want), static_cast<unsigned long long>(want));
    return RestoreShard(env_, dir, me);
  }
  return Status::Ok();  // the check after this names what is wrong
}

}  // namespace strata::cluster
