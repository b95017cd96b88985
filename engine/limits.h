// Named limits of the engine (TIGER_STYLE: a limit on everything).
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::engine {

// Workers one store accepts.
inline constexpr uint32_t kWorkersMax = 256;
// Tables one store accepts.
inline constexpr uint32_t kTablesMax = 1024;
// Keys one Pull, Push or Intent call accepts.
inline constexpr uint64_t kBatchKeysMax = uint64_t{1} << 22;
// Keys waiting in one worker's intent inbox before Intent answers
// ResourceExhausted (the planner is far behind).
inline constexpr uint64_t kInboxKeysMax = uint64_t{1} << 26;
// Fraction of T0 the planner may pin for intents; the rest stays free for
// synchronous fetches, so a Pull always makes progress.
inline constexpr double kPinFractionMax = 0.875;
// The device table is sized so that the rows asked for fill at most this
// load factor (its probe bound is documented for 0.9).
inline constexpr double kDeviceLoadFactorMax = 0.85;
// next_use values at or above this mark rows without intent; the fallback
// policy orders them below it (the device table evicts the largest first).
inline constexpr int64_t kFallbackBase = int64_t{1} << 62;

// Rows of T0 each table gets at least (device_rows_max is split evenly).
inline constexpr uint64_t kTableT0RowsMin = 16;
// Embedding floats per row.
inline constexpr uint32_t kDimMax = 4096;
// Bytes of a table name ([A-Za-z0-9_.-]).
inline constexpr size_t kTableNameBytesMax = 128;
// Version of the engine's checkpoint meta (tables, clocks).
inline constexpr int kMetaVersion = 1;
// Keys per T0 operation in the chunked path (batches larger than the room
// T0 has left for them).
inline constexpr uint64_t kChunkKeysMax = uint64_t{1} << 16;
// Span of the fallback recency counter above kFallbackBase.
inline constexpr int64_t kFallbackSpan = int64_t{1} << 61;

}  // namespace strata::engine
