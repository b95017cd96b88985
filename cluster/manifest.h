// The files that tie a cluster's shards together (docs/cluster.md):
//
//   DIR/CLUSTER               the cluster manifest, written by rank 0 last in
//                             Cluster::Checkpoint: world size, ownership
//                             function, generation, each rank's generation
//   DIR/rank-<r>/CLUSTER_SHARD  rank r's shard record: the generation its
//                             Store checkpoint holds, and the one a
//                             checkpoint in progress is writing (pending)
//
// Both are short text files, a line "<field> <value>" each, the last line
// "checksum <xxh64 of every byte before it, 16 hex digits>". Both are
// replaced atomically through an io::Env: write NAME.tmp, fsync it, rename it
// over NAME, fsync the directory, so a crash leaves the old or the new file,
// whole. Decoding checks the magic line, the version, every field and the
// checksum: Corruption naming the file and the line at fault.
//
// Thread safety: pure functions of their arguments; the caller serialises
// writers of one file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/env.h"
#include "strata/options.h"
#include "strata/status.h"

namespace strata::cluster {

inline constexpr const char* kManifestName = "CLUSTER";
inline constexpr const char* kShardRecordName = "CLUSTER_SHARD";
// Version 2 of CLUSTER adds the SSD backend and the tables (what `strata
// cluster reshard` and `strata cluster export` need to open the shards);
// version 1 (neither) still opens. CLUSTER_SHARD is at version 1.
inline constexpr uint32_t kManifestVersion = 2;
inline constexpr uint32_t kShardRecordVersion = 1;
// The largest world size a manifest may name (bounds what decoding sizes).
inline constexpr uint32_t kWorldSizeMax = 1 << 16;

// What of a table fixes its rows' layout on disk (the shards' checkpoints
// hold these too): enough to open the shards without the program's options.
struct ManifestTable {
  std::string name;
  uint32_t dim = 0;
  Optimizer optimizer = Optimizer::kSgd;
};

struct ClusterManifest {
  uint32_t version = kManifestVersion;  // as read (EncodeClusterManifest writes the current one)
  uint32_t world_size = 0;
  std::string ownership;  // kClusterOwnershipName of the cluster that wrote it
  uint64_t generation = 0;
  std::vector<uint64_t> rank_generations;  // world_size entries
  // Version 2 on.
  SsdBackend ssd_backend = SsdBackend::kNative;
  std::vector<ManifestTable> tables;
};

struct ShardRecord {
  uint32_t rank = 0;
  uint32_t world_size = 0;
  uint64_t generation = 0;  // the cluster generation the shard's checkpoint holds
  // A checkpoint in progress: generation + 1 from before the shard's Store
  // checkpoint until it succeeded; equal to `generation` otherwise.
  uint64_t pending = 0;
};

std::string EncodeClusterManifest(const ClusterManifest& manifest);
[[nodiscard]] Result<ClusterManifest> DecodeClusterManifest(const std::string& text,
                                                            const std::string& path);
std::string EncodeShardRecord(const ShardRecord& record);
[[nodiscard]] Result<ShardRecord> DecodeShardRecord(const std::string& text,
                                                    const std::string& path);

// dir/name's bytes, or nullopt when there is no such file.
[[nodiscard]] Result<std::optional<std::string>> ReadSmallFile(io::Env* env, const std::string& dir,
                                                               const std::string& name);

// The directory of rank r's shard: dir/rank-<r>.
std::string ShardDir(const std::string& dir, uint32_t rank);

}  // namespace strata::cluster
