// Limits of storage/: every *_max constant of the module in one place.
//
// Thread safety: constants only.
#pragma once

#include <cstdint>

namespace strata::storage {

// Tables in one row store.
inline constexpr uint32_t kTablesMax = 1024;
// Bytes of one row (embedding plus optimizer state).
inline constexpr uint32_t kRowBytesMax = 1u << 20;
// Bytes of a table name.
inline constexpr uint32_t kTableNameBytesMax = 256;
// Bytes of the opaque checkpoint meta.
inline constexpr uint64_t kCheckpointMetaBytesMax = 64ull << 20;
// Leaf pages one native write or read round touches at most (bounds the
// aligned buffers of a round: 1024 x 4 KiB = 4 MiB for 512-byte rows).
inline constexpr uint32_t kLeavesPerRoundMax = 1024;
// Physical pages of one data file (page numbers are 32-bit, kNoPage reserved).
inline constexpr uint64_t kPagesPerFileMax = 0xFFFFFFFEull;
// Bytes of the RocksDB backend's CHECKPOINT pointer ("ckpt-<n>\n", n below
// 10^19); a longer file is Corruption, not read whole.
inline constexpr uint64_t kCheckpointPointerBytesMax = 64;
// Bytes of one native MANIFEST.
inline constexpr uint64_t kManifestBytesMax = 16ull << 30;

}  // namespace strata::storage
