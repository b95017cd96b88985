// Limits of storage/: every *_max constant of the module in one place.
//
// Thread safety: constants only.
#pragma once

#include <cstdint>

#include "strata/options.h"

namespace strata::storage {

// Tables in one row store or DRAM cache: the store's kTablesMax
// (strata/options.h). The native MANIFEST reader rejects more, so raising it
// keeps old stores readable and lowering it would not.
// Bytes of one row (embedding plus optimizer state), T1 and T2 alike.
inline constexpr uint32_t kRowBytesMax = 1u << 20;
// Bytes of a table name in a row store (the native MANIFEST stores it with a
// u32 length). Row stores have accepted names this long since format
// version 1 (the Store's own limit, kTableNameBytesMax, is lower), so the
// MANIFEST reader keeps accepting them: lowering this would make stores
// written directly through storage/ (benchmarks, tests) unreadable.
inline constexpr uint32_t kRowStoreTableNameBytesMax = 256;
static_assert(kTableNameBytesMax <= kRowStoreTableNameBytesMax,
              "every Store table name must fit a row store");
// Bytes of the opaque checkpoint meta.
inline constexpr uint64_t kCheckpointMetaBytesMax = 64ull << 20;
// Leaf pages one native write or read round touches at most (bounds the
// aligned buffers of a round: 1024 x 4 KiB = 4 MiB for 512-byte rows).
inline constexpr uint32_t kLeavesPerRoundMax = 1024;
// Leaf pages one round of a write log merge touches at most (16 MiB of
// leaves read for 512-byte rows, about as much written): larger than a
// put's rounds, as the merge takes the table's lock once a round and that
// wait (for a get or put in flight) is paid per round.
inline constexpr uint32_t kMergeLeavesPerRoundMax = 4096;
// Physical pages of one data file (page numbers are 32-bit, kNoPage reserved).
inline constexpr uint64_t kPagesPerFileMax = 0xFFFFFFFEull;
// Bytes of the RocksDB backend's CHECKPOINT pointer ("ckpt-<n>\n", n below
// 10^19); a longer file is Corruption, not read whole.
inline constexpr uint64_t kCheckpointPointerBytesMax = 64;
// Bytes of one native MANIFEST.
inline constexpr uint64_t kManifestBytesMax = 16ull << 30;

// Format version 2: segment slots of one table's log file (a record's
// address is slot x records per segment + index, CompactIndex::kPayloadBits
// bits), and the range of segment sizes.
inline constexpr uint64_t kLogSlotsMax = uint64_t{1} << 20;
inline constexpr uint64_t kSegmentBytesMin = 64ull << 10;
inline constexpr uint64_t kSegmentBytesMax = 64ull << 20;
// Format version 2, key ranges (SsdIndex::kRanges): a table has at most
// 2^kRangeBitsMax ranges (each holds a log head and its pending blocks).
inline constexpr uint32_t kRangeBitsMax = 12;

}  // namespace strata::storage
