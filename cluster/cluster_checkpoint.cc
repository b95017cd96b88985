// Cluster::Checkpoint (docs/cluster.md, "Checkpoint"). Generation g + 1 of a
// cluster at g, every step agreed by all ranks before the next:
//   1. each rank records "generation g, pending g+1" in its CLUSTER_SHARD;
//   2. each rank checkpoints its shard (Store::Checkpoint);
//   3. each rank records "generation g+1" (nothing pending);
//   4. rank 0 writes CLUSTER: world size, ownership, g+1 for every rank.
// Open accepts a directory only when every shard record matches CLUSTER, so
// a crash anywhere before 4 completes is refused, naming the rank, rather
// than opened at mixed generations; a failure returned by any step fails the
// call on every rank, and a retry redoes the steps for the same g + 1.
#include "cluster/cluster_impl.h"
#include "cluster/manifest.h"
#include "io/env.h"

namespace strata::cluster {

Status ClusterImpl::WriteShardRecord(uint64_t generation, uint64_t pending) {
  ShardRecord record;
  record.rank = static_cast<uint32_t>(rank());
  record.world_size = static_cast<uint32_t>(world_size());
  record.generation = generation;
  record.pending = pending;
  return io::Env::Default()->WriteFileAtomically(
      ShardDir(options_.store.dir, rank()), kShardRecordName,
      std::string(kShardRecordName) + ".tmp", EncodeShardRecord(record));
}

Status ClusterImpl::Checkpoint() {
  base::MutexLock lock(&collective_mu_);
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(CheckOpen()));
  const uint64_t next = generation_ + 1;
  const std::string context = "Cluster::Checkpoint of generation " + std::to_string(next);
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(WriteShardRecord(generation_, next).WithContext(context)));
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(shard_->Checkpoint().WithContext(context)));
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(WriteShardRecord(next, next).WithContext(context)));

  std::vector<uint64_t> generations(world_size());
  STRATA_RETURN_IF_ERROR(comm_->AllGather(&next, generations.data(), 1, MPI_UINT64_T));
  Status written = Status::Ok();
  if (rank() == 0) {
    ClusterManifest manifest;
    manifest.world_size = static_cast<uint32_t>(world_size());
    manifest.ownership = kClusterOwnershipName;
    manifest.generation = next;
    manifest.rank_generations = generations;
    written = io::Env::Default()->WriteFileAtomically(options_.store.dir, kManifestName,
                                                      std::string(kManifestName) + ".tmp",
                                                      EncodeClusterManifest(manifest));
  }
  STRATA_RETURN_IF_ERROR(comm_->AgreeOn(written.WithContext(context)));
  generation_ = next;
  return Status::Ok();
}

}  // namespace strata::cluster
