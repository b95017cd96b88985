// ClusterOwner (include/strata/cluster.h): which rank owns (table, key).
// The function is part of the on-disk contract of a cluster (its manifest
// names it as kClusterOwnershipName): changing it needs a new name.
#include "base/assert.h"
#include "base/hash.h"
#include "strata/cluster_owner.h"

namespace strata {

uint32_t ClusterOwner(TableId table, Key key, uint32_t world_size) {
  STRATA_ASSERT(world_size > 0, "ClusterOwner: world_size 0");
  const uint64_t mixed = MixSplit64(key ^ MixMurmur64(uint64_t{table} + 1));
  return static_cast<uint32_t>(mixed % world_size);
}

}  // namespace strata
