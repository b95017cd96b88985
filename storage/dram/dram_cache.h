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
// Thread safety: every method may be called from any thread. Lookup takes
// only the read locks of the stripes it touches and writes nothing shared
// but counters, so lookups run in parallel with each other and with
// mutations of other stripes. Inserts run in parallel too: the mutation
// mutex (the eviction order's lock) is held only to claim the batch's keys,
// to take victims and place the accounting, and to set the rows' codes at
// the end; the index probes, the victims' write-back I/O, their erases, the
// row copies and the new rows' index entries run outside it, under the
// stripe locks (one exclusive hold per stripe per batch). Every other
// mutation (Erase, BeginMoveUp, EndMoveUp, SetNextUse, FlushDirty, ForEach)
// holds the mutex throughout. Erase, EndMoveUp, BeginMoveUp, FlushDirty and
// ForEach wait (the mutex released) for the in-flight Inserts that hold
// their rows (all of them, for the last two); Erase, and an Insert short of
// room, may wait for a CleanAhead write to finish.
// Ownership: the cache owns its arenas; `backing` is borrowed and must
// outlive the cache; callers own the spans they pass.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "storage/dram/dram_claims.h"
#include "storage/ssd/row_store.h"
#include "strata/status.h"
#include "strata/types.h"

namespace strata::storage {

class DramArena;
class DramIndex;

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
};

struct DramCacheStats {
  uint64_t rows = 0;              // resident rows, all tables
  uint64_t rows_max = 0;          // dram_bytes_max / smallest row_bytes
  uint64_t hits = 0;              // Lookup keys found
  uint64_t misses = 0;            // Lookup keys missing
  uint64_t inserts = 0;           // rows newly placed (overwrites not counted)
  uint64_t evictions = 0;         // rows evicted to make room
  uint64_t dirty_writebacks = 0;  // dirty rows written back (eviction, FlushDirty, CleanAhead)
  uint64_t cleaned_ahead = 0;     // of those, rows written by CleanAhead
  uint64_t writeback_errors = 0;  // failed MultiPut calls
  uint64_t room_waits = 0;        // Inserts that waited for a CleanAhead write to make room
  // Waits for an in-flight Insert: by Inserts (for a key it places, a row
  // it holds, or room), by Erase and moves up (for a row it holds).
  uint64_t insert_waits = 0;
  uint64_t bytes_used = 0;   // row bytes of resident rows
  uint64_t bytes_max = 0;    // dram_bytes_max
  uint64_t index_bytes = 0;  // index + slot keys + per-row metadata + eviction queues
};

class DramCache {
 public:
  // REQUIRES: tables have distinct ids, 0 < row_bytes <= dram_bytes_max.
  // `backing` may be null (no write-back: dirty rows are never evicted).
  static Result<std::unique_ptr<DramCache>> Create(const DramCacheOptions& options,
                                                   const std::vector<TableSpec>& tables,
                                                   RowStore* backing);
  ~DramCache();
  DramCache(const DramCache&) = delete;
  DramCache& operator=(const DramCache&) = delete;

  // Copies rows of present keys into rows[i*row_bytes]; found[i] = 1/0;
  // dirty[i] (optional: empty span) = dirty flag. A hit is not a use: it
  // leaves the eviction order alone.
  [[nodiscard]] Status Lookup(TableId table, std::span<const Key> keys, std::span<std::byte> rows,
                              std::span<uint8_t> found, std::span<uint8_t> dirty);
  // Inserts or overwrites rows with dirty flags (empty span: all clean) and
  // next intended use (empty span: all kClockNever). Duplicate keys: last
  // wins. Evicts to make room; when the room needs rows CleanAhead is
  // writing, waits for that write (one MultiPut; no clean starts while an
  // Insert waits). ResourceExhausted (naming the table, nothing changed) when
  // the new rows cannot fit even after evicting every evictable row.
  [[nodiscard]] Status Insert(TableId table, std::span<const Key> keys,
                              std::span<const std::byte> rows, std::span<const uint8_t> dirty,
                              std::span<const Clock> next_use) EXCLUDES(mu_);
  // Insert in pieces of at most as many rows of `table` as the whole cache
  // holds, for a batch that may outnumber it: a later piece may evict rows
  // of an earlier one (dirty ones written to backing first). Sets *placed to
  // the keys of the pieces that went in, a prefix of `keys`: all of them
  // when OK; on error the failed piece and those after it changed nothing.
  [[nodiscard]] Status InsertInPieces(TableId table, std::span<const Key> keys,
                                      std::span<const std::byte> rows,
                                      std::span<const uint8_t> dirty,
                                      std::span<const Clock> next_use, uint64_t* placed)
      EXCLUDES(mu_);
  // Drops rows (the engine moved them up); missing keys are ignored.
  // FailedPrecondition (nothing changed) when a present key is pinned.
  [[nodiscard]] Status Erase(TableId table, std::span<const Key> keys) EXCLUDES(mu_);
  // Moving rows up a tier (the engine's MakeResident) without the tier
  // losing their room meanwhile. BeginMoveUp pins the present keys among
  // `keys` (move->pinned[i] = 1) and counts their bytes as leaving
  // (move->bytes; only while the total stays within transit_rows_max rows of
  // the smallest row size): until EndMoveUp, Insert admits that many more
  // row bytes before it evicts, so the rows the tier above demotes to make
  // room for the leaving ones take their place here instead of pushing other
  // rows out. The leaving rows stay resident and readable, and are no
  // victims, until EndMoveUp: with `moved` they are erased (the tier above
  // holds them now); without, they are unpinned and stay, and the next Insert
  // evicts down to dram_bytes_max. Every BeginMoveUp needs its EndMoveUp, with
  // the same keys and `move`.
  struct MoveUp {
    std::vector<uint8_t> pinned;  // per key: pinned (present) by BeginMoveUp
    uint64_t bytes = 0;           // bytes counted as leaving
  };
  [[nodiscard]] Status BeginMoveUp(TableId table, std::span<const Key> keys, MoveUp* move)
      EXCLUDES(mu_);
  [[nodiscard]] Status EndMoveUp(TableId table, std::span<const Key> keys, MoveUp* move, bool moved)
      EXCLUDES(mu_);
  // Sets the next intended use (kClockNever: none); missing keys ignored.
  [[nodiscard]] Status SetNextUse(TableId table, std::span<const Key> keys,
                                  std::span<const Clock> next_use) EXCLUDES(mu_);
  // Writes every dirty row to backing (MultiPuts of at most
  // kDramFlushBatchRowsMax rows) and marks it clean. On error the rows not
  // yet written stay dirty. FailedPrecondition when dirty rows exist and
  // there is no backing store.
  [[nodiscard]] Status FlushDirty() EXCLUDES(clean_mu_, mu_);
  // Cleans ahead of eviction: writes the dirty rows among the next
  // `window_rows` victims (at most `rows_max` of them) to backing and marks
  // them clean, so the Inserts that later evict them do no I/O. The writes run
  // without the mutation lock: meanwhile the rows stay resident and readable,
  // are no victims, and an Erase of one waits for its write. A row overwritten
  // meanwhile stays dirty, and an Insert that needs one as a victim waits.
  // Returns the rows written (0: nothing to clean, or an Insert is waiting for
  // room, which evicts and writes the victims itself). On a write error the
  // rows stay dirty and the error is returned. One cleaner at a time (calls
  // serialise).
  [[nodiscard]] Result<uint64_t> CleanAhead(uint64_t window_rows, uint64_t rows_max)
      EXCLUDES(clean_mu_, mu_);
  // Calls fn for every resident row of `table` (order unspecified); stops at
  // the first non-OK Status and returns it.
  // REQUIRES: fn does not call back into this cache.
  [[nodiscard]] Status ForEach(
      TableId table, const std::function<Status(Key, std::span<const std::byte>, bool dirty)>& fn)
      EXCLUDES(mu_);
  DramCacheStats Stats() const EXCLUDES(mu_);

  // True when every table's arena follows MPOL_INTERLEAVE.
  bool numa_interleaved() const;

 private:
  struct Table;
  struct TableSlots;
  struct Victim {
    uint32_t table;
    uint32_t slot;
  };
  struct InsertWork;  // an Insert's per-thread scratch (dram_cache_insert.cc)
  // A row queued for eviction with the code it had when queued (stale once
  // the row's code or queued flag changed).
  struct QueueEntry {
    uint32_t code;
    uint32_t table;
    uint32_t slot;
  };
  static bool QueueLess(const QueueEntry& a, const QueueEntry& b);

  DramCache(const DramCacheOptions& options, RowStore* backing);
  Result<Table*> FindTable(TableId id, std::string_view op) const;
  Status CheckKeySpan(const Table& t, std::string_view op, size_t keys, size_t other,
                      std::string_view what, bool may_be_empty) const;

  // Lookup's copy step: keys[order[j]] (hashes[order[j]] their hashes,
  // stripe_of[j] their stripe) in ascending stripe order, looked up and
  // copied; returns the hits.
  uint64_t LookupPipeline(const Table& t, std::span<const Key> keys,
                          std::span<const uint64_t> hashes, std::span<const uint32_t> order,
                          std::span<const uint32_t> stripe_of, std::span<std::byte> rows,
                          std::span<uint8_t> found, std::span<uint8_t> dirty) const;

  // Eviction order (dram_order.cc).
  uint32_t CodeOf(Clock next_use) const;  // larger: evicted first
  // Occupied and none of the flags in evict_mask_ (cleaning, hold, pinned;
  // dirty too without a backing store): one mask test, so a sweep's passes
  // over the metadata run at memory speed.
  bool Evictable(uint32_t meta) const { return (meta & evict_mask_) == evict_occupied_; }
  // Queues the row when it is evictable, unqueued, and ranks above the front.
  // File and SetCode are inline (dram_cache_internal.h): most calls end at
  // File's tests; FileLate queues.
  void File(uint32_t table, uint32_t slot) REQUIRES(mu_);
  void FileLate(uint32_t table, uint32_t slot) REQUIRES(mu_);
  void SetCode(uint32_t table, uint32_t slot, uint32_t code) REQUIRES(mu_);
  // Forgets both queues (the next PopVictim sweeps again).
  void DropQueues() REQUIRES(mu_);
  // The code at or above which `quota` evictable rows rank (*take: how many
  // of those with exactly that code count; *count: min(quota, evictable
  // rows)); false when no row is evictable.
  bool Threshold(uint64_t quota, uint32_t* code, uint64_t* take, uint64_t* count) const
      REQUIRES(mu_);
  // Refills front_ with the next front_rows_max_ victims; false when none.
  bool Sweep() REQUIRES(mu_);
  // The next victim (unqueued), or false when no row is evictable. Defined
  // inline in dram_order.cc, for SelectVictims there only.
  bool PopVictim(Victim* v) REQUIRES(mu_);
  Status SelectVictims(const Table& t, uint64_t bytes_needed, std::vector<Victim>* victims)
      REQUIRES(mu_);
  // Insert's steps (dram_cache_insert.cc), in order: claim the batch's keys
  // (waiting while another Insert holds one), keeping the last occurrence of
  // each; probe them (stripe read
  // locks); hold the rows to overwrite, take victims and slots and place
  // the accounting (waiting for room while CleanAhead writes or other
  // Inserts are in flight); write dirty victims back, erase them, copy and
  // publish the rows (stripe locks only); set flags and codes, drop claims.
  void ClaimKeys(const Table& t, std::span<const Key> keys, InsertWork& w) EXCLUDES(mu_);
  void DropClaims(const Table& t, std::span<const Key> keys, const InsertWork& w) REQUIRES(mu_);
  void ProbeKeys(const Table& t, std::span<const Key> keys, InsertWork& w) const EXCLUDES(mu_);
  Status Prepare(Table& t, std::span<const Key> keys, InsertWork& w) REQUIRES(mu_);
  // Undoes Prepare's holds and slots (before the accounting was placed).
  void Unprepare(Table& t, InsertWork& w, bool victims_too) REQUIRES(mu_);
  Status WriteBackVictims(InsertWork& w) EXCLUDES(mu_);
  void EraseVictims(InsertWork& w) EXCLUDES(mu_);
  void PlaceRows(Table& t, std::span<const Key> keys, std::span<const std::byte> rows,
                 std::span<const uint8_t> dirty, InsertWork& w) EXCLUDES(mu_);
  void Finish(Table& t, std::span<const uint8_t> dirty, std::span<const Clock> next_use,
              InsertWork& w) REQUIRES(mu_);
  // A failed write-back: the victims stay (those of tables written, clean),
  // nothing is inserted.
  void Abandon(Table& t, InsertWork& w) REQUIRES(mu_);
  void Release(const Victim& v) REQUIRES(mu_);
  void Release(const Victim& v, uint64_t hash) REQUIRES(mu_);  // hash: of the victim's key
  // Frees a slot that is out of the index (metadata cleared, on the free list).
  void FreeSlot(uint32_t table, uint32_t slot) REQUIRES(mu_);

  // The metadata word of slot `slot` of the table at position `table`.
  uint32_t& Meta(uint32_t table, uint32_t slot) const REQUIRES(mu_);
  uint32_t FindSlot(const Table& t, Key key) const REQUIRES(mu_);
  // A free slot of table t, or kDramNoSlot when its arena has none left.
  uint32_t AllocateSlot(Table& t) REQUIRES(mu_);
  // Sets the dirty flag (metadata and index entry); `file`: queue the row
  // when that made it evictable.
  void SetDirtyLocked(Table& t, uint32_t slot, bool dirty, bool file = true) REQUIRES(mu_);
  // True when a row of `keys` has one of `flags` (kDramMetaCleaning: being
  // written by CleanAhead; kDramMetaHold: held by an in-flight Insert).
  bool AnyFlagged(const Table& t, std::span<const Key> keys, uint32_t flags) const REQUIRES(mu_);
  // Waits until no Insert is in flight; new ones wait meanwhile.
  void WaitInsertsDone() REQUIRES(mu_);
  // Pins the present keys (found[i] = 1) so they are never evicted; pins
  // count (a key pinned by two moves up needs both EndMoveUps).
  Status Pin(const Table& t, std::span<const Key> keys, std::span<uint8_t> found) EXCLUDES(mu_);

  // Constant after construction.
  const DramCacheOptions options_;
  RowStore* const backing_;
  const uint32_t evict_mask_;      // see Evictable
  const uint32_t evict_occupied_;  // kDramMetaOccupied
  std::vector<std::unique_ptr<Table>> tables_;
  std::unordered_map<TableId, uint32_t> table_pos_;
  uint64_t rows_max_ = 0;

  base::Mutex clean_mu_ ACQUIRED_BEFORE(mu_);  // held by CleanAhead and FlushDirty throughout
  mutable base::Mutex mu_;                     // serialises mutations; order before stripe locks
  // With mu_: a CleanAhead write finished, an Insert finished or dropped its
  // claims.
  base::CondVar state_cv_;
  uint64_t cleaning_rows_ GUARDED_BY(mu_) = 0;  // rows with cleaning set
  uint64_t room_waiters_ GUARDED_BY(mu_) = 0;   // Inserts waiting on state_cv_ for a clean
  // Keys of the Inserts between ClaimKeys and Finish.
  DramKeyClaims claims_ GUARDED_BY(mu_);
  uint64_t inflight_ GUARDED_BY(mu_) = 0;          // Inserts between Prepare and Finish
  uint64_t done_gen_ GUARDED_BY(mu_) = 0;          // Inserts finished or abandoned
  uint64_t quiet_waiters_ GUARDED_BY(mu_) = 0;     // callers of WaitInsertsDone waiting
  std::vector<TableSlots> slots_ GUARDED_BY(mu_);  // by table position, as tables_
  uint64_t bytes_used_ GUARDED_BY(mu_) = 0;
  // Bytes of rows in a move up (BeginMoveUp), admitted beyond dram_bytes_max,
  // at most transit_bytes_max_ (what every table's arena has slots for).
  uint64_t leaving_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t transit_bytes_max_ = 0;  // constant after construction
  uint64_t rows_ GUARDED_BY(mu_) = 0;
  // The eviction queues: front_, the next victims as of the last Sweep,
  // sorted by code (back = next); late_, a max-heap of rows queued since
  // with a code above front_min_. Rows outside both rank at most front_min_.
  uint64_t front_rows_max_ = 0;  // constant after construction
  std::vector<QueueEntry> front_ GUARDED_BY(mu_);
  std::vector<QueueEntry> late_ GUARDED_BY(mu_);
  uint32_t front_min_ GUARDED_BY(mu_);  // kDramNoFront: no sweep in force
  uint64_t sweeps_ GUARDED_BY(mu_) = 0;
  // Threshold's histograms (top kDramCoarseBits of the codes, whether a bin
  // holds one code, the rest of the bits within one bin), kept between sweeps.
  mutable std::vector<uint64_t> hist_coarse_ GUARDED_BY(mu_);
  mutable std::vector<uint32_t> hist_only_ GUARDED_BY(mu_);
  mutable std::vector<uint64_t> hist_fine_ GUARDED_BY(mu_);

  std::atomic<uint64_t> hits_{0}, misses_{0}, inserts_{0}, evictions_{0};
  std::atomic<uint64_t> dirty_writebacks_{0}, writeback_errors_{0}, cleaned_ahead_{0};
  std::atomic<uint64_t> room_waits_{0}, insert_waits_{0};
};

}  // namespace strata::storage
