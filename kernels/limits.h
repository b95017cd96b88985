// Limits of the kernels module (TIGER_STYLE: a bound on everything). The
// probe bound and bucket width define the table's layout; see
// docs/device-table.md.
#pragma once

#include <cstdint>

namespace strata::kernels {

// Slots per bucket; a lookup reads a key's home bucket and, only when that
// bucket has overflowed, the next ones.
inline constexpr uint32_t kBucketSlots = 16;
// Probe bound: a key lives in its home bucket or one of the next
// kProbeBucketsMax - 1 buckets (wrapping), i.e. at most 512 slots are read.
inline constexpr uint32_t kProbeBucketsMax = 32;
// Load factor the table is sized for: slots >= capacity_rows / kLoadFactorMax.
inline constexpr double kLoadFactorMax = 0.85;
// Widest embedding a table accepts: kTableDimMax (strata/options.h).
// Most rows a table may be created for (2^32 slots keeps slot ids 32-bit).
inline constexpr uint64_t kCapacityRowsMax = uint64_t{3} << 30;
// Most keys one batched call may carry.
inline constexpr uint64_t kBatchKeysMax = uint64_t{1} << 30;
// Host runner: keys per task handed to one pool thread.
inline constexpr uint64_t kHostGrainKeys = 4096;

}  // namespace strata::kernels
