// DramLookup: DramCache::Lookup's pipeline. One pass over a batch's keys in
// the caller's order, across all the shards, that reads each stripe's map
// and each row without the stripe's lock: an optimistic read, checked by
// the stripe's sequence count (base::SeqSharedMutex). So a lookup sorts
// nothing, writes nothing shared but its counters, and holds no writer off.
//
// A key goes through three stages, kDramLookupAhead keys apart, so the cache
// misses of many keys are in flight together:
//   1. its hash, shard and stripe, and the stripe's sequence count; its two
//      candidate bucket lines prefetched;
//   2. the lines scanned (the first tag match of its home line, else of its
//      other line); the entry's slot read and the slot prefetched;
//   3. the key in the slot's header compared, the row copied, and the
//      stripe's count read again.
// A key is looked up again under its stripe's read lock (DramHashMap::Find)
// when its count was odd (a writer in) or moved, when its entry names no
// slot the arena maps (a torn read), when its slot holds another key (a
// false tag match, or a change), or when no entry matched and its home
// bucket has stashed entries (the stash is read under the lock only). An
// absent key whose count held is a miss.
//
// Why the reads are sound: every change to a stripe's map, and to a row
// while its entry is in the map, is made with the stripe's lock held
// exclusively, which moves the count; a slot is reused only after its
// entry left the map, so a row read from a slot that has changed hands is
// caught by the count too. The maps' arrays move only with the index's
// arrays_mu() held exclusively, and the pipeline holds it shared (every
// shard's index, in shard order) for the whole batch. Slots stay mapped for
// the cache's life, so a read through a torn entry that passes the arena's
// bound is harmless. These reads race with writers by design: the thread
// sanitizer is told to ignore them (base/race_annotations.h), not the
// locked path's.
//
// Thread safety: any number of threads, with any writers. Internal to
// storage/dram.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "storage/dram/dram_shard.h"
#include "strata/types.h"

namespace strata::storage {

// Looks up `keys` in one table: views[s] is shard s's view of it (a key's
// shard is its hash's bits from kDramShardHashShift, masked to
// views.size() - 1). Copies each present key's row to rows[i * row_bytes],
// sets found[i] (1/0) and, when `dirty` is not empty, dirty[i]; adds each
// shard's hits, misses and retries to counts[s]. Returns the hits. REQUIRES:
// views.size() a power of two, equal to counts.size(); spans checked by the
// caller (rows holds keys.size() rows of the views' row_bytes).
uint64_t DramLookup(std::span<const DramShard::LookupView> views, std::span<const Key> keys,
                    std::span<std::byte> rows, std::span<uint8_t> found, std::span<uint8_t> dirty,
                    std::span<DramLookupCounts> counts);

}  // namespace strata::storage
