// Reshard: rewrites a checkpointed cluster directory for another number of
// ranks, offline (`strata cluster reshard --from DIR --ranks N --out DIR2`;
// docs/cluster.md, "Resharding").
//
// Every row moves whole (embedding and optimizer state, as bytes) from the
// SSD tier of its old shard to that of its new owner, ClusterOwner(table,
// key, N): each old shard's row store is opened at its checkpoint (which
// holds every row: a checkpoint writes T0's and T1's dirty rows down), its
// tables scanned, and the rows put into N new row stores, each then
// checkpointed with the old shards' engine meta (tables and worker clocks,
// the same on every shard). The new shard records and, last, the new CLUSTER
// manifest carry the old generation. A crash leaves DIR2 without CLUSTER,
// which no Cluster opens: delete it and run again.
//
// --from must be a version-2 manifest (it names the tables and the SSD
// backend) whose every shard is at its generation with nothing pending;
// --out must be missing or empty, and neither --from nor inside it (paths
// compared resolved). Every new shard's row store is open at once, so the
// new ranks must fit the process's open-file limit (ulimit -n): the files
// of an empty row store of these tables, counted in a temporary directory,
// twice over per rank. All of that is checked before anything is created.
// Opening the old row stores discards what was written after their
// checkpoint, as reopening the cluster would.
//
// Thread safety: one call at a time per directory. No MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/status.h"

namespace strata::cluster {

struct ReshardReport {
  uint32_t from_ranks = 0;
  uint32_t to_ranks = 0;
  uint64_t generation = 0;
  uint64_t rows = 0;                    // rows moved, all tables
  std::vector<uint64_t> rows_per_rank;  // in the new shards
};

[[nodiscard]] Result<ReshardReport> Reshard(const std::string& from, uint32_t ranks,
                                            const std::string& out);

}  // namespace strata::cluster
