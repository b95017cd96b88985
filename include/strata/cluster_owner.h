// ClusterOwner: which rank of a strata::Cluster (strata/cluster.h) owns a
// row. Part of a cluster's on-disk contract: its manifest names the function,
// and a cluster reopens only under the function it was written with. Needs
// no MPI, so tools (resharding, exports) use it without a communicator.
//
// Thread safety: a pure function.
#pragma once

#include <cstdint>

#include "strata/types.h"

namespace strata {

// The owner rank of (table, key) among `world_size` ranks:
//   MixSplit64(key ^ MixMurmur64(table + 1)) % world_size
// (splitmix64's and MurmurHash3's 64-bit finalizers). Named
// "splitmix64-table-key-v1" in the cluster manifest; a cluster reopens only
// under the function it was written with. REQUIRES: world_size > 0.
uint32_t ClusterOwner(TableId table, Key key, uint32_t world_size);
inline constexpr const char* kClusterOwnershipName = "splitmix64-table-key-v1";

}  // namespace strata
