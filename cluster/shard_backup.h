// The previous checkpoint of a shard, kept while a cluster checkpoint is in
// flight, so that a crash anywhere in it can be rolled back on every rank
// (docs/cluster.md, "Checkpoint and the cluster manifest").
//
//   DIR/rank-<r>.prev/                a copy of DIR/rank-<r> at generation g,
//     ...                             taken before the shard's checkpoint
//     CLUSTER_BACKUP                  written last: "the copy of generation g
//                                     is whole" (a shard record: rank, world
//                                     size, generation g, pending g)
//
// The copy holds every file of the shard's directory but RocksDB's `live/`
// (its open rebuilds `live/` from the checkpoint it points to) and `*.tmp`
// files: what a reopen of the shard at generation g reads. It is taken while
// the shard's Store is open: no file its last checkpoint references is
// changed before that Store's next checkpoint (the SSD tier writes only free
// pages, and deletes and truncates only at a checkpoint), so the copy opens
// at exactly generation g. Each file is fsynced, then every directory, then
// the marker is written atomically.
//
// Restore swaps the copy in: rename DIR/rank-<r> to DIR/rank-<r>.discard,
// rename the copy to DIR/rank-<r>, fsync DIR, delete the discarded tree.
// FinishInterrupted completes or undoes what a crash left of a restore.
//
// Cost: a checkpoint reads and writes the whole shard once more (the price of
// keeping generation g on storage that frees its pages at the next
// checkpoint); ClusterOptions::keep_previous_checkpoint turns it off, and
// with it the recovery.
//
// Thread safety: one caller per shard (the rank's collective calls).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "io/env.h"
#include "strata/status.h"

namespace strata::cluster {

inline constexpr const char* kBackupMarkerName = "CLUSTER_BACKUP";

std::string BackupDir(const std::string& dir, uint32_t rank);

// The generation of rank r's whole backup, or nullopt when there is none (or
// only part of one).
[[nodiscard]] Result<std::optional<uint64_t>> BackupGeneration(io::Env* env, const std::string& dir,
                                                               uint32_t rank);

// Copies rank r's shard as the backup of `generation`; keeps a whole backup
// of that generation that is already there (a retried checkpoint: the shard
// may be past it by now), replaces any other.
[[nodiscard]] Status BackupShard(io::Env* env, const std::string& dir, uint32_t rank,
                                 uint32_t world_size, uint64_t generation);

// Replaces rank r's shard by its whole backup. REQUIRES: the shard's Store is
// closed; BackupGeneration has one.
[[nodiscard]] Status RestoreShard(io::Env* env, const std::string& dir, uint32_t rank);

// Deletes rank r's backup (once the cluster manifest of the next generation
// is durable).
[[nodiscard]] Status DropBackup(io::Env* env, const std::string& dir, uint32_t rank);

// After a crash during RestoreShard: moves a whole backup into a missing
// shard directory, deletes a leftover discarded tree.
[[nodiscard]] Status FinishInterrupted(io::Env* env, const std::string& dir, uint32_t rank);

}  // namespace strata::cluster
