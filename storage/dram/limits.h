// Limits of the DRAM row cache (tier T1): named *_max constants, one place.
//
// Thread safety: constants. Ownership: none.
#pragma once

#include <cstdint>

#include "storage/ssd/limits.h"
#include "strata/options.h"

namespace strata::storage {

// Slots of one table are addressed by uint32; the last value marks "empty".
inline constexpr uint64_t kDramSlotsPerTableMax = (1ull << 32) - 2;
// Lock stripes of one table's index (power of two at most this).
inline constexpr uint32_t kDramLockStripesMax = 4096;
// Shards of one cache (DramCacheOptions::shards): at most kDramShardsMax
// (strata/options.h); the automatic count gives each shard at least kDramShardRowsMin rows, up
// to kDramShardsAuto shards. A key's shard is kDramShardHashShift bits up its
// hash: above the index's tag bits (the low 32), below the stripe bits
// (the top ones, at most 12).
inline constexpr uint32_t kDramShardsAuto = 16;
inline constexpr uint64_t kDramShardRowsMin = 1ull << 18;
inline constexpr uint32_t kDramShardHashShift = 32;
// With several shards each owns all but 1/kDramShardPoolDivisor of its share
// of the budget; those parts form a pool any shard borrows from (DramBudgetPool),
// so the cache fills to its budget though the hash splits keys unevenly.
// Pieces of InsertInPieces are a shard's own bytes.
inline constexpr uint64_t kDramShardPoolDivisor = 8;
// Rows handed to the backing store in one MultiPut during FlushDirty.
inline constexpr uint64_t kDramFlushBatchRowsMax = 4096;
// Index stripes grow by kDramIndexGrowNum / kDramIndexGrowDen once more
// than kDramIndexLoadNum / kDramIndexLoadDen of their buckets are full (load
// 0.78 to 0.875: the stripes of a table grow together, so its load is where
// this range puts it, not an average over stripes at different phases).
inline constexpr uint64_t kDramIndexLoadNum = 7;
inline constexpr uint64_t kDramIndexLoadDen = 8;
inline constexpr uint64_t kDramIndexGrowNum = 9;
inline constexpr uint64_t kDramIndexGrowDen = 8;
// A sweep of the eviction metadata queues the next max(kDramFrontRowsMin,
// rows_max / kDramFrontRowsDivisor) victims, so it reads at most
// kDramFrontRowsDivisor * 3 metadata words per victim.
inline constexpr uint64_t kDramFrontRowsMin = 1024;
inline constexpr uint64_t kDramFrontRowsDivisor = 32;
// CleanAhead keeps the dirty rows one scan of the metadata found in its
// window, nearest eviction first, and writes them over the calls that follow
// before it scans again: at most a shard's rows / kDramCleanPlanDivisor of
// them (at least kDramCleanPlanRowsMin), the nearest.
inline constexpr uint64_t kDramCleanPlanDivisor = 128;
inline constexpr uint64_t kDramCleanPlanRowsMin = 4096;
// Insert and eviction prefetch index buckets and victims' slots this many
// rows ahead of the row they work on.
inline constexpr uint64_t kDramPrefetchRows = 16;
// Lookup prefetches a key's index bucket this many keys before it probes it,
// and its row this many keys before it copies it.
inline constexpr uint32_t kDramLookupAhead = 8;
// An index entry's two candidate buckets lie in one group of this many
// buckets (4 KiB: one page), so a probe's two lines cost one TLB miss.
inline constexpr uint64_t kDramIndexGroupBuckets = 64;
// Cuckoo moves an insert into two full buckets makes at most (each step
// first looks for an entry of the bucket whose other bucket has room); past
// them the entry left over goes to its stripe's stash.
inline constexpr uint32_t kDramIndexCuckooStepsMax = 16;
// Stash entries a map reserves at construction (it grows past them only in
// the rare case that more entries fail their cuckoo moves at once).
inline constexpr uint32_t kDramIndexStashEntries = 16;
// Eviction codes: 26 bits (2 of class, 24 of value); a sweep histograms the
// top kDramCoarseBits, then the rest within one coarse bin.
inline constexpr uint32_t kDramCodeBits = 26;
inline constexpr uint32_t kDramCoarseBits = 12;
inline constexpr uint32_t kDramNoFront = UINT32_MAX;
// Tables one cache serves and the largest row a table may declare:
// kTablesMax (strata/options.h) and kRowBytesMax (storage/ssd/limits.h).
// Arena mappings are rounded up to this (the huge-page size on x86-64).
inline constexpr uint64_t kDramArenaAlignBytes = 2ull << 20;

}  // namespace strata::storage
