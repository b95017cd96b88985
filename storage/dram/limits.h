// Limits of the DRAM row cache (tier T1): named *_max constants, one place.
//
// Thread safety: constants. Ownership: none.
#pragma once

#include <cstdint>

#include "storage/ssd/limits.h"

namespace strata::storage {

// Slots of one table are addressed by uint32; the last value marks "empty".
inline constexpr uint64_t kDramSlotsPerTableMax = (1ull << 32) - 2;
// Lock stripes of one table's index (power of two at most this).
inline constexpr uint32_t kDramLockStripesMax = 4096;
// Rows handed to the backing store in one MultiPut during FlushDirty.
inline constexpr uint64_t kDramFlushBatchRowsMax = 4096;
// Victim selection re-files rows whose use counters moved since they were
// filed; once one call has re-filed more than this many, and lookups hit a
// quarter of the order's size or more since the last rebuild, it rebuilds
// the whole eviction order in one sorted pass (cheaper than random inserts).
inline constexpr uint64_t kDramRefilesBeforeRebuildMin = 1024;
// Tables one cache serves and the largest row a table may declare:
// kTablesMax (strata/options.h) and kRowBytesMax (storage/ssd/limits.h).
// Arena mappings are rounded up to this (the huge-page size on x86-64).
inline constexpr uint64_t kDramArenaAlignBytes = 2ull << 20;

}  // namespace strata::storage
