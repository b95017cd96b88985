// Named limits of the engine (TIGER_STYLE: a limit on everything).
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/options.h"

namespace strata::engine {

// The lock file in every store directory (StoreOptions.dir).
inline constexpr char kLockFileName[] = "LOCK";
// Workers and tables one store accepts, bytes of a table name, embedding
// floats per row: kWorkersMax, kTablesMax, kTableNameBytesMax, kTableDimMax
// (strata/options.h).
// Keys one Pull, Push or Intent call accepts.
inline constexpr uint64_t kBatchKeysMax = uint64_t{1} << 22;
// Keys waiting in one worker's intent inbox before Intent answers
// ResourceExhausted (the planner is far behind).
inline constexpr uint64_t kInboxKeysMax = uint64_t{1} << 26;
// Fraction of T0 the planner may pin for intents; the rest stays free for
// synchronous fetches, so a Pull always makes progress.
inline constexpr double kPinFractionMax = 0.875;
// T0 tables get slots for their share of device_rows_max at this load factor
// at most: below the table's own limit, so a crowded probe window stays rare
// (measured: inserts failed at 0.85 under eviction churn).
inline constexpr double kDeviceLoadFactorMax = 0.7;
// next_use values at or above this mark rows without intent; the fallback
// policy orders them below it (the device table evicts the largest first).
inline constexpr int64_t kFallbackBase = int64_t{1} << 62;

// The largest StoreOptions.device_share_growth_max accepted:
// kDeviceShareGrowthMax (strata/options.h).

// Rows of T0 each table gets at least (device_rows_max is split evenly).
inline constexpr uint64_t kTableT0RowsMin = 16;
// Version of the engine's checkpoint meta (tables, clocks).
inline constexpr int kMetaVersion = 1;
// Keys per T0 operation in the chunked path (batches larger than the room
// T0 has left for them).
inline constexpr uint64_t kChunkKeysMax = uint64_t{1} << 16;
// Fallback values lie in [kFallbackBase, kFallbackBase + kFallbackSpan):
// a score of access frequency (high bits, kLfu only) and recency (low bits)
// is subtracted from the top, so the device table's "largest first" evicts
// the least frequent, then least recent, row first.
inline constexpr int64_t kFallbackSpan = int64_t{1} << 61;
inline constexpr uint64_t kFallbackSeqMask = (uint64_t{1} << 40) - 1;
inline constexpr int kFallbackFreqShift = 40;
inline constexpr uint64_t kFallbackFreqMax = (uint64_t{1} << 20) - 1;
// Counters per row of the store's frequency sketch, per row the store can
// hold above SSD (T0 + T1), and at most.
inline constexpr uint64_t kSketchWidthPerRow = 2;
inline constexpr uint64_t kSketchWidthMax = uint64_t{1} << 24;

// The cleaner writes dirty T1 rows among the next dram_rows_max / this
// victims, in passes of at most kCleanBatchRowsMax rows.
inline constexpr uint64_t kCleanWindowDivisor = 4;
inline constexpr uint64_t kCleanBatchRowsMax = 1024;
// The cleaner wakes once T1 took a window / this rows since its last pass
// (or every planner period): each pass reads all of T1's metadata, and T1
// taking a few rows moves the window by as few.
inline constexpr uint64_t kCleanWakeDivisor = 16;

}  // namespace strata::engine
