// DramShard: one shard of the DRAM row cache (tier T1). DramCache
// (dram_cache.h) splits its keys over one or more shards by hash bits; each
// shard is a whole cache of its own over its share of the budget: row arenas
// and a lock-striped index per table, the per-slot metadata, its exact
// eviction order, its mutation mutex and claims. Everything DramCache's
// header says about one cache holds for one shard; this header lists what a
// shard adds for DramCache (subsets of a batch given by positions, what
// the lookup's pipeline reads of it). DramCache::Lookup runs one pipeline
// over all the shards (dram_lookup.h).
//
// Thread safety: as DramCache (every method from any thread). Ownership: a
// shard owns its arenas and indexes; `backing` is borrowed.
// Internal to storage/dram: not part of the storage API.
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
#include "storage/dram/dram_cache.h"
#include "storage/dram/dram_claims.h"
#include "storage/ssd/row_store.h"
#include "strata/status.h"
#include "strata/types.h"

namespace strata::storage {

class DramArena;
class DramIndex;

// One shard's part of a Lookup (DramLookup, dram_lookup.h).
struct DramLookupCounts {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t retries = 0;  // keys read again under their stripe's lock
};

// The part of dram_bytes_max the shards of one cache share (DramCache): a
// shard holds its own bytes (DramCacheOptions::dram_bytes_max of its
// options) outright and borrows from here when it needs more, and gives back
// what no row of it may still need. So the cache holds its whole budget
// though the hash puts a few more keys in one shard than in another.
// Lock-free; `Take` never lends more than is there.
class DramBudgetPool {
 public:
  explicit DramBudgetPool(uint64_t bytes) : bytes_(bytes), free_(bytes) {}
  // Takes min(want, what is free); returns what it took.
  uint64_t Take(uint64_t want);
  void Give(uint64_t bytes) { free_.fetch_add(bytes, std::memory_order_relaxed); }
  uint64_t bytes() const { return bytes_; }
  uint64_t free() const { return free_.load(std::memory_order_relaxed); }

 private:
  const uint64_t bytes_;
  std::atomic<uint64_t> free_;
};

class DramShard {
 public:
  // `options` are this shard's: its own part of dram_bytes_max and its share
  // of the lock stripes (DramCache divides them). `pool`, when not null, is
  // the budget the shards share (borrowed; outlives the shard), of which
  // this shard may borrow up to `borrow_max` bytes (its arenas have room for
  // its own bytes and those). REQUIRES: tables have distinct ids,
  // 0 < row_bytes <= options.dram_bytes_max. `backing` may be null.
  static Result<std::unique_ptr<DramShard>> Create(const DramCacheOptions& options,
                                                   const std::vector<TableSpec>& tables,
                                                   RowStore* backing,
                                                   DramBudgetPool* pool = nullptr,
                                                   uint64_t borrow_max = 0);
  ~DramShard();
  DramShard(const DramShard&) = delete;
  DramShard& operator=(const DramShard&) = delete;

  // What DramCache::Lookup's optimistic pipeline (dram_lookup.h) reads of
  // one table of this shard: its index and its slots. Valid while the
  // shard lives; the index's arrays_mu() says when its maps may be read.
  struct LookupView {
    const DramIndex* index = nullptr;
    const std::byte* slots = nullptr;  // slot 0: the key, then the row
    uint64_t slot_bytes = 0;
    uint64_t slots_max = 0;  // slots the arena maps (an entry past them is torn)
    uint32_t row_bytes = 0;
  };
  [[nodiscard]] Result<LookupView> View(TableId table) const;
  // Counts a Lookup's part in this shard in its stats.
  void CountLookups(const DramLookupCounts& c) {
    hits_.fetch_add(c.hits, std::memory_order_relaxed);
    misses_.fetch_add(c.misses, std::memory_order_relaxed);
    lookup_retries_.fetch_add(c.retries, std::memory_order_relaxed);
  }

  // The rest as DramCache's methods of the same names (dram_cache.h), over
  // this shard's keys.

  // Inserts the keys at `positions` (ascending; empty: every key) of the
  // batch: rows, dirty and next_use are the whole batch's (dirty and
  // next_use may be empty); `hashes`, when not empty, the keys' DramKeyHash
  // (by key position). All or nothing, as DramCache::Insert.
  [[nodiscard]] Status Insert(TableId table, std::span<const Key> keys,
                              std::span<const std::byte> rows, std::span<const uint8_t> dirty,
                              std::span<const Clock> next_use,
                              std::span<const uint32_t> positions = {},
                              std::span<const uint64_t> hashes = {}) EXCLUDES(mu_);
  // Insert in pieces of at most as many rows of `table` as this shard
  // holds. *placed: how many of the keys (of `positions`, when not empty)
  // went in, a prefix; on error the failed piece and those after it changed
  // nothing.
  [[nodiscard]] Status InsertInPieces(TableId table, std::span<const Key> keys,
                                      std::span<const std::byte> rows,
                                      std::span<const uint8_t> dirty,
                                      std::span<const Clock> next_use,
                                      std::span<const uint32_t> positions,
                                      std::span<const uint64_t> hashes, uint64_t* placed)
      EXCLUDES(mu_);
  [[nodiscard]] Status Erase(TableId table, std::span<const Key> keys) EXCLUDES(mu_);
  struct MoveUp {
    std::vector<uint8_t> pinned;  // per key: pinned (present) by BeginMoveUp
    uint64_t bytes = 0;           // bytes counted as leaving
  };
  [[nodiscard]] Status BeginMoveUp(TableId table, std::span<const Key> keys, MoveUp* move)
      EXCLUDES(mu_);
  [[nodiscard]] Status EndMoveUp(TableId table, std::span<const Key> keys, MoveUp* move, bool moved)
      EXCLUDES(mu_);
  [[nodiscard]] Status SetNextUse(TableId table, std::span<const Key> keys,
                                  std::span<const Clock> next_use) EXCLUDES(mu_);
  [[nodiscard]] Status FlushDirty() EXCLUDES(clean_mu_, mu_);
  [[nodiscard]] Result<uint64_t> CleanAhead(uint64_t window_rows, uint64_t rows_max)
      EXCLUDES(clean_mu_, mu_);
  [[nodiscard]] Status ForEach(
      TableId table, const std::function<Status(Key, std::span<const std::byte>, bool dirty)>& fn)
      EXCLUDES(mu_);
  DramCacheStats Stats() const EXCLUDES(mu_);

  bool numa_interleaved() const;

 private:
  struct Table;
  struct TableSlots;
  struct Victim {
    uint32_t table;
    uint32_t slot;
  };
  struct InsertWork;  // an Insert's per-thread scratch (dram_shard_insert.cc)
  // A row queued for eviction with the code it had when queued (stale once
  // the row's code or queued flag changed).
  struct QueueEntry {
    uint32_t code;
    uint32_t table;
    uint32_t slot;
  };
  static bool QueueLess(const QueueEntry& a, const QueueEntry& b);

  DramShard(const DramCacheOptions& options, RowStore* backing, DramBudgetPool* pool);
  Result<Table*> FindTable(TableId id, std::string_view op) const;
  Status CheckKeySpan(const Table& t, std::string_view op, size_t keys, size_t other,
                      std::string_view what, bool may_be_empty) const;

  // Eviction order (dram_order.cc).
  uint32_t CodeOf(Clock next_use) const;  // larger: evicted first
  // Occupied and none of the flags in evict_mask_ (cleaning, hold, pinned;
  // dirty too without a backing store): one mask test, so a sweep's passes
  // over the metadata run at memory speed.
  bool Evictable(uint32_t meta) const { return (meta & evict_mask_) == evict_occupied_; }
  // Queues the row when it is evictable, unqueued, and ranks above the front.
  // File and SetCode are inline (dram_shard_internal.h): most calls end at
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
  // Insert's steps (dram_shard_insert.cc), in order: claim the batch's keys
  // (waiting while another Insert holds one), keeping the last occurrence of
  // each; probe them (stripe read
  // locks); hold the rows to overwrite, take victims and slots and place
  // the accounting (waiting for room while CleanAhead writes or other
  // Inserts are in flight); write dirty victims back, erase them, copy and
  // publish the rows (stripe locks only); set flags and codes, drop claims.
  void ClaimKeys(const Table& t, std::span<const Key> keys, std::span<const uint32_t> positions,
                 InsertWork& w) EXCLUDES(mu_);
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
  // CleanAhead's plan: the dirty rows among the next `window_rows` victims
  // (Threshold's, then a pass over the metadata), at most
  // clean_plan_rows_max_, nearest eviction first. `flagged`: rows of the
  // window the calling CleanAhead has flagged as cleaning already.
  void PlanClean(uint64_t window_rows, uint64_t flagged) REQUIRES(clean_mu_, mu_);
  // A failed write-back: the victims stay (those of tables written, clean),
  // nothing is inserted.
  void Abandon(Table& t, InsertWork& w) REQUIRES(mu_);
  // Borrows up to `want` bytes from pool_ (what it has free, up to
  // borrow_max_ in all).
  void BorrowLocked(uint64_t want) REQUIRES(mu_);
  // Gives back to pool_ the borrowed bytes no resident row (but the leaving
  // ones, admitted on top) needs.
  void GiveBackLocked() REQUIRES(mu_);
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
  // CleanAhead's plan (PlanClean), consumed from clean_next_ by the calls
  // that follow; made again when it has nothing left to write, when a call
  // asks for another window, or once the victims evicted since it passed
  // half its window (the window moved on). Its entries are checked again
  // under mu_ before a write (a row since evicted, erased, cleaned, moving up
  // or given a lower code, a nearer next use, is skipped).
  std::vector<QueueEntry> clean_plan_ GUARDED_BY(clean_mu_);
  size_t clean_next_ GUARDED_BY(clean_mu_) = 0;
  uint64_t clean_window_ GUARDED_BY(clean_mu_) = 0;     // 0: no plan
  uint64_t clean_evictions_ GUARDED_BY(clean_mu_) = 0;  // evictions_ when planned
  uint64_t clean_plan_rows_max_ = 0;                    // constant after construction
  std::atomic<uint64_t> clean_plan_bytes_{0};           // its capacity, for Stats
  mutable base::Mutex mu_;  // serialises mutations; order before stripe locks
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
  // The shared budget (null: this shard's own bytes are all it has) and the
  // bytes borrowed from it: room for resident rows is
  // options_.dram_bytes_max + borrowed_ (+ leaving_bytes_).
  DramBudgetPool* const pool_;
  uint64_t borrowed_ GUARDED_BY(mu_) = 0;
  // At most this may be borrowed (the arenas' room beyond the own bytes):
  // the pool, at most one equal share, within every table's slot limit.
  uint64_t borrow_max_ = 0;  // constant after construction
  // Bytes of the victims of Inserts between Prepare and Finish: they come
  // back if the write-back fails (Abandon), so GiveBackLocked counts them.
  uint64_t inflight_freed_ GUARDED_BY(mu_) = 0;
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

  std::atomic<uint64_t> hits_{0}, misses_{0}, lookup_retries_{0}, inserts_{0}, evictions_{0};
  std::atomic<uint64_t> dirty_writebacks_{0}, writeback_errors_{0}, cleaned_ahead_{0};
  std::atomic<uint64_t> room_waits_{0}, insert_waits_{0}, clean_plans_{0};
};

}  // namespace strata::storage
