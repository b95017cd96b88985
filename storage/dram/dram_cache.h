// DramCache: tier T1, a DRAM cache of fixed-size rows in front of the SSD
// RowStore (T2), with write-back of dirty rows.
//
// Each table has an arena of row slots (DramArena: pages interleaved across
// all NUMA nodes, huge pages where available; a slot is the row's key, then
// the row), a lock-striped index key -> slot (DramIndex, 8-byte entries) and
// 4 bytes of metadata per slot (eviction code and flags). Capacity is
// `dram_bytes_max` row bytes summed over all tables; index and metadata come
// on top (at most 24 bytes per resident row, see docs/dram-cache.md).
//
// Eviction follows each row's next use, a Clock: the row with the largest
// next use goes first (Belady's rule on the known future), rows with no next
// use (kClockNever) before any with one; next uses in [fallback_base,
// fallback_end) are the caller's fallback order (LRU or LFU scores), above
// every real clock. Next uses are kept as 26-bit codes, exact up to 2^18
// clocks (and fallback scores) and to 4 parts in a million beyond; equal
// codes leave in no particular order. A Lookup is no use. Rows moving up
// (BeginMoveUp to EndMoveUp) are never evicted; with no backing store dirty rows are never
// evicted either; rows CleanAhead is writing are evicted once their write is
// done (an Insert that needs them waits for it). Dirty victims are written
// to `backing` in one MultiPut per table before their slots are reused; if a
// write fails the victims stay, still dirty, Insert inserts nothing and
// returns the error.
//
// Every 64-bit key is valid, 0 and 2^64-1 included.
//
// Shards: the keys are split over `shards` shards by bits of their hash
// (DramShard, dram_shard.h), each a whole cache over its share of
// dram_bytes_max (7/8 of an equal share its own, the rest a pool any shard
// borrows from, so the cache fills to dram_bytes_max though keys split
// unevenly; borrowed bytes are not taken back from a shard that holds rows
// for them, so one shard's part of an Insert fits for sure only within its
// own bytes) and of the lock stripes, with its own eviction order and
// mutation mutex, so inserts on several threads serialise only within a
// shard. The eviction order is exact within each shard and approximate
// across them: a shard evicts its own farthest-next-use rows, a random
// sample of the whole's (docs/dram-cache.md, "Shards"). One shard (the
// default below kDramShardRowsMin rows per shard) is the exact order.
//
// Thread safety: every method may be called from any thread. Lookup reads
// the index and the rows without their stripes' locks, checking each
// stripe's sequence count (dram_lookup.h), and writes nothing shared but
// counters, so lookups run in parallel with each other and with mutations;
// a key whose stripe changed while it was read is read again under the
// stripe's read lock. Lookups wait only while an index grows (it grows by
// 9/8 as a table fills, never once the cache is full). Inserts run in parallel too: a shard's
// mutation mutex (its eviction order's lock) is held only to claim the
// batch's keys, to take victims and place the accounting, and to set the
// rows' codes at the end; the index probes, the victims' write-back I/O,
// their erases, the row copies and the new rows' index entries run outside
// it, under the stripe locks (one exclusive hold per stripe per batch). Every
// other mutation (Erase, BeginMoveUp, EndMoveUp, SetNextUse, FlushDirty,
// ForEach) holds each shard's mutex throughout its part there. Erase,
// EndMoveUp, BeginMoveUp, FlushDirty and ForEach wait (the mutex released)
// for the in-flight Inserts that hold their rows (all of them, for the last
// two); Erase, and an Insert short of room, may wait for a CleanAhead write
// to finish. A call that spans several shards visits them one at a time.
// Ownership: the cache owns its arenas; `backing` is borrowed and must
// outlive the cache; callers own the spans they pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "storage/dram/limits.h"
#include "storage/ssd/row_store.h"
#include "strata/status.h"
#include "strata/types.h"

namespace strata::storage {

class DramBudgetPool;
class DramShard;

struct DramCacheOptions {
  // Row bytes of resident rows summed over all tables (index and metadata
  // overhead come on top: docs/dram-cache.md).
  uint64_t dram_bytes_max = 1ull << 30;
  // Next uses in [fallback_base, fallback_end) are fallback values: ranked
  // by their distance below fallback_end (the nearest goes first), so a
  // score of up to 2^18 is kept exactly. Default: none.
  Clock fallback_base = kClockNever;
  Clock fallback_end = kClockNever;
  // MADV_HUGEPAGE on the arenas: fewer TLB misses, coarser page residency.
  bool huge_pages = true;
  // Index lock stripes per table (rounded up to a power of two): more
  // stripes, less contention between threads, a little more memory.
  uint32_t lock_stripes = 64;
  // Rows that may be counted as leaving at once (BeginMoveUp): each table's
  // arena reserves this many slots beyond dram_bytes_max / row_bytes
  // (address space only), so resident row bytes may exceed dram_bytes_max
  // by the leaving rows' bytes while a move up is in flight. 0: none.
  uint64_t transit_rows_max = 0;
  // Shards (a power of two, at most kDramShardsMax); 0: as many as give
  // each at least kDramShardRowsMin rows of the smallest row size, at most
  // kDramShardsAuto. Each shard owns 7/8 of dram_bytes_max / shards row
  // bytes and borrows the rest from a pool the shards share, and gets
  // lock_stripes / shards stripes (at least 1).
  uint32_t shards = 0;
};

struct DramCacheStats {
  uint64_t rows = 0;      // resident rows, all tables
  uint64_t rows_max = 0;  // dram_bytes_max / smallest row_bytes
  uint64_t hits = 0;      // Lookup keys found
  uint64_t misses = 0;    // Lookup keys missing
  // Lookup keys read again under their stripe's lock: a writer changed the
  // stripe meanwhile, a false tag match, or a stash search (dram_lookup.h).
  uint64_t lookup_retries = 0;
  uint64_t inserts = 0;           // rows newly placed (overwrites not counted)
  uint64_t evictions = 0;         // rows evicted to make room
  uint64_t dirty_writebacks = 0;  // dirty rows written back (eviction, FlushDirty, CleanAhead)
  uint64_t cleaned_ahead = 0;     // of those, rows written by CleanAhead
  // CleanAhead's passes over the metadata: each plans the writes of the
  // calls after it (the dirty rows of its window, up to a bound), so this
  // grows by one per plan, not per call.
  uint64_t clean_plans = 0;
  uint64_t writeback_errors = 0;  // failed MultiPut calls
  uint64_t room_waits = 0;        // Inserts that waited for a CleanAhead write to make room
  // Waits for an in-flight Insert: by Inserts (for a key it places, a row
  // it holds, or room), by Erase and moves up (for a row it holds).
  uint64_t insert_waits = 0;
  uint64_t bytes_used = 0;  // row bytes of resident rows
  uint64_t bytes_max = 0;   // dram_bytes_max
  // index + slot keys + per-row metadata + eviction queues + CleanAhead's plan
  uint64_t index_bytes = 0;
};

class DramCache {
 public:
  // REQUIRES: tables have distinct ids, 0 < row_bytes <= the bytes a shard
  // owns (7/8 of dram_bytes_max / shards; all of it with one shard). `backing` may be null (no
  // write-back: dirty rows are never evicted).
  static Result<std::unique_ptr<DramCache>> Create(const DramCacheOptions& options,
                                                   const std::vector<TableSpec>& tables,
                                                   RowStore* backing);
  ~DramCache();
  DramCache(const DramCache&) = delete;
  DramCache& operator=(const DramCache&) = delete;

  // Copies rows of present keys into rows[i*row_bytes]; found[i] = 1/0;
  // dirty[i] (optional: empty span) = dirty flag. A hit is not a use: it
  // leaves the eviction order alone. The bytes at a missing key's place in
  // `rows` are unspecified (an optimistic read may have copied a row there
  // before finding it changed).
  [[nodiscard]] Status Lookup(TableId table, std::span<const Key> keys, std::span<std::byte> rows,
                              std::span<uint8_t> found, std::span<uint8_t> dirty);
  // Inserts or overwrites rows with dirty flags (empty span: all clean) and
  // next intended use (empty span: all kClockNever). Duplicate keys: last
  // wins. Evicts to make room; when the room needs rows CleanAhead is
  // writing, waits for that write (one MultiPut; no clean starts while an
  // Insert waits). ResourceExhausted (naming the table) when a shard's new
  // rows cannot fit even after evicting every evictable row of it. On an
  // error nothing changed in the failing shard and the shards after it;
  // with more than one shard, those before it keep their rows
  // (InsertInPieces tells which).
  [[nodiscard]] Status Insert(TableId table, std::span<const Key> keys,
                              std::span<const std::byte> rows, std::span<const uint8_t> dirty,
                              std::span<const Clock> next_use);
  // Insert in pieces of at most as many rows of `table` as a shard holds,
  // for a batch that may outnumber the cache: a later piece may evict rows
  // of an earlier one (dirty ones written to backing first). placed[i] = 1
  // when key i's row went in (every key when OK); on error the failed piece
  // and those after it changed nothing. REQUIRES: placed.size() ==
  // keys.size().
  [[nodiscard]] Status InsertInPieces(TableId table, std::span<const Key> keys,
                                      std::span<const std::byte> rows,
                                      std::span<const uint8_t> dirty,
                                      std::span<const Clock> next_use, std::span<uint8_t> placed);
  // Drops rows (the engine moved them up); missing keys are ignored.
  // FailedPrecondition when a present key is pinned: nothing changed in its
  // shard (with several shards, the keys of the shards before it are gone).
  [[nodiscard]] Status Erase(TableId table, std::span<const Key> keys);
  // Moving rows up a tier (the engine's MakeResident) without the tier
  // losing their room meanwhile. BeginMoveUp pins the present keys among
  // `keys` (move->pinned[i] = 1) and counts their bytes as leaving
  // (move->bytes; only while each shard's total stays within
  // transit_rows_max rows of the smallest row size): until EndMoveUp, Insert
  // admits that many more row bytes before it evicts, so the rows the tier
  // above demotes to make room for the leaving ones take their place here
  // instead of pushing other rows out. The leaving rows stay resident and
  // readable, and are no victims, until EndMoveUp: with `moved` they are
  // erased (the tier above holds them now); without, they are unpinned and
  // stay, and the next Insert evicts down to dram_bytes_max. Every
  // BeginMoveUp needs its EndMoveUp, with the same keys and `move`.
  struct MoveUp {
    std::vector<uint8_t> pinned;        // per key: pinned (present) by BeginMoveUp
    uint64_t bytes = 0;                 // bytes counted as leaving
    std::vector<uint64_t> shard_bytes;  // of those, per shard
  };
  [[nodiscard]] Status BeginMoveUp(TableId table, std::span<const Key> keys, MoveUp* move);
  [[nodiscard]] Status EndMoveUp(TableId table, std::span<const Key> keys, MoveUp* move,
                                 bool moved);
  // Sets the next intended use (kClockNever: none); missing keys ignored.
  [[nodiscard]] Status SetNextUse(TableId table, std::span<const Key> keys,
                                  std::span<const Clock> next_use);
  // Writes every dirty row to backing (MultiPuts of at most
  // kDramFlushBatchRowsMax rows) and marks it clean. On error the rows not
  // yet written stay dirty. FailedPrecondition when dirty rows exist and
  // there is no backing store.
  [[nodiscard]] Status FlushDirty();
  // Cleans ahead of eviction: writes the dirty rows among the next
  // `window_rows` victims (at most `rows_max` of them, nearest eviction
  // first; with several shards, each shard's share of both, rounded up) to
  // backing and marks them clean, so the Inserts that later evict them do no
  // I/O. One pass over the metadata plans the calls that follow with the same
  // window (its dirty rows, up to a bound): they write the plan's rows that
  // are still dirty and no farther from eviction than when planned, and pass
  // again once it is spent, after a failed write, or once evictions moved the
  // window by half (`Stats().clean_plans` counts the passes). So rows that
  // came into the window since the pass wait for the next one, and planned
  // rows that others overtook since are still written. The writes run without
  // the mutation lock: meanwhile the rows stay resident and readable, are no
  // victims, and an Erase of one waits for its write. A row overwritten
  // meanwhile stays dirty, and an Insert that needs one as a victim waits.
  // Returns the rows written (0: nothing to clean, or an Insert is waiting
  // for room, which evicts and writes the victims itself). On a write error
  // the rows stay dirty and the error is returned. One cleaner at a time per
  // shard (calls serialise).
  [[nodiscard]] Result<uint64_t> CleanAhead(uint64_t window_rows, uint64_t rows_max);
  // Calls fn for every resident row of `table` (order unspecified); stops at
  // the first non-OK Status and returns it.
  // REQUIRES: fn does not call back into this cache.
  [[nodiscard]] Status ForEach(
      TableId table, const std::function<Status(Key, std::span<const std::byte>, bool dirty)>& fn);
  // The shards' stats summed (bytes_max: dram_bytes_max; rows_max: it over
  // the smallest row_bytes), each shard read in turn under its mutex.
  DramCacheStats Stats() const;

  // True when every table's arena follows MPOL_INTERLEAVE.
  bool numa_interleaved() const;
  // The shards in use.
  uint32_t shards() const { return static_cast<uint32_t>(shards_.size()); }

 private:
  DramCache(const DramCacheOptions& options, std::unique_ptr<DramBudgetPool> pool,
            std::vector<std::unique_ptr<DramShard>> shards);
  uint32_t ShardOf(uint64_t hash) const {
    return static_cast<uint32_t>(hash >> kDramShardHashShift) & (shards() - 1);
  }
  // A batch's keys grouped by shard (Split): shard s's positions, ascending,
  // are of(s); hashes[i] is key i's DramKeyHash.
  struct Parts {
    std::vector<uint32_t> order;
    std::vector<uint32_t> bounds;  // shards() + 1
    std::vector<uint64_t> hashes;
    std::span<const uint32_t> of(uint32_t s) const {
      return std::span<const uint32_t>(order).subspan(bounds[s], bounds[s + 1] - bounds[s]);
    }
  };
  void Split(std::span<const Key> keys, Parts& parts) const;
  // The shard an Insert visits first (that of its first key).
  uint32_t FirstShard(const Parts& parts) const;
  static void KeysOf(std::span<const Key> keys, std::span<const uint32_t> positions,
                     std::vector<Key>* out);
  // Insert's spans (rows, dirty and next_use) for `keys` keys.
  Status CheckRows(const TableSpec& spec, std::string_view op, size_t keys,
                   std::span<const std::byte> rows, std::span<const uint8_t> dirty,
                   std::span<const Clock> next_use) const;
  Result<const TableSpec*> FindTable(TableId table, std::string_view op) const;
  Status CheckSpan(const TableSpec& spec, std::string_view op, size_t want, size_t got,
                   std::string_view what, bool may_be_empty) const;

  const DramCacheOptions options_;
  std::unique_ptr<DramBudgetPool> pool_;  // null with one shard; the shards borrow it
  std::vector<std::unique_ptr<DramShard>> shards_;
  std::unordered_map<TableId, TableSpec> specs_;
  // Per table, each shard's view for Lookup (dram_cache.cc; constant
  // after Create).
  struct LookupViews;
  std::unique_ptr<LookupViews> lookup_views_;
  uint64_t rows_max_ = 0;  // dram_bytes_max / the smallest row_bytes
};

}  // namespace strata::storage
