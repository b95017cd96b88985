// The types of format 2's native store (log_row_store.h): a table's
// segment slots, heads and index, and the Store, whose methods live in
// log_row_store.cc (open, appends, gets, writes, checkpoint) and
// log_cleaner.cc (cleaning). Internal to storage/ssd.
//
// Thread safety: see log_row_store.h and the annotations below.
// Ownership: the Store owns its tables, files and cleaner thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "io/aligned.h"
#include "io/io_threads.h"
#include "storage/ssd/manifest.h"
#include "storage/ssd/native_common.h"
#include "storage/ssd/page_file.h"
#include "storage/ssd/row_store_factory.h"
#include "storage/ssd/ssd_format.h"
#include "storage/ssd/table_index.h"

namespace strata::storage::logstore {

inline constexpr uint64_t kBlock = ssd::kAlignBytes;
inline constexpr uint64_t kHeader = ssd::kSegmentHeaderBytes;
inline constexpr uint64_t kNone = ~uint64_t{0};

inline uint64_t RoundUp(uint64_t x) { return (x + kBlock - 1) / kBlock * kBlock; }
inline uint64_t RoundDown(uint64_t x) { return x / kBlock * kBlock; }

enum SlotState : uint8_t { kFree = 0, kBoth = 1, kCurrent = 2, kCheckpointOnly = 3 };
// Heads: the user head, the cleaner's, then (key ranges) one per range.
enum HeadKind : int { kUserHead = 0, kCleanerHead = 1, kRangeHead0 = 2 };
// What a segment holds in a table of key ranges: log records of one range,
// the base of one range (sorted by MixKey), or a merge's output not yet
// switched in (no get, Scan or merge sees it).
enum SlotRole : uint8_t { kRoleLog = 0, kRoleBase = 1, kRoleMergeOutput = 2 };
// Pending bytes a range head keeps in DRAM before writing (so a range's
// appends go to the device in runs of about this).
inline constexpr uint64_t kRangeHeadHoldBytes = 64 << 10;

struct Slot {
  uint64_t segment_seq = 0;
  uint64_t min_seq = kNone;  // smallest record seq of the segment
  uint32_t records = 0;      // records appended (all written or in a head's pend)
  uint32_t live = 0;         // index entries naming one of its records
  uint8_t state = kFree;
  bool sealed = false;      // takes no more records (full, or sealed by a checkpoint)
  uint8_t role = kRoleLog;  // key ranges: SlotRole
  int32_t range = -1;       // key ranges: the range of its records
};

// The segment a head appends to. Its bytes [0, written) are on disk; pend
// holds [pend_off, End()) in DRAM (pend_off <= written, both multiples of
// kBlock): the partly filled last block, and the blocks holding the start
// of a record that ends in it, so every record not wholly on disk is read
// from pend.
struct Head {
  int64_t slot = -1;  // -1: none
  uint64_t written = 0;
  uint64_t pend_off = 0;
  io::AlignedBuffer pend;
  // Bytes of whole blocks the head may keep pending before it writes them
  // (0: it writes every whole block at once; range heads: kRangeHeadHoldBytes).
  uint64_t hold = 0;
};

// Where an append's records go: one chunk per segment they fill, the first
// maybe continuing the head's segment, the others fresh slots taken by the
// plan (given back by UndoAppend if the write fails).
struct AppendPlan {
  struct Chunk {
    uint64_t slot;
    uint64_t segment_seq;
    bool fresh;         // a new segment (its header block is written too)
    uint64_t first;     // index of its first record in the segment
    uint64_t n;         // records of recs
    uint64_t base;      // segment offset of the chunk's first staged byte
    uint64_t from, to;  // segment bytes written
    size_t at;          // staging offset
  };
  std::vector<Chunk> chunks;
  std::vector<uint64_t> taken;  // slots allocated for it
  size_t staged = 0;            // staging bytes
};

// The directory of one base segment of a key range: for record i,
// fp[i] = (MixKey - first) >> shift, non-decreasing (records are sorted by
// MixKey), 2 bytes per record. The records that may hold a key are the run
// of fp equal to its value: one in most lookups (a segment of n records
// spreads them over 2^16 values).
struct BaseSegment {
  uint64_t slot = 0;
  uint64_t first = 0, last = 0;  // MixKey of its first and last record
  uint32_t shift = 0;
  std::vector<uint16_t> fp;

  // Sets shift and fp from the segment's sorted mixed keys.
  void Build(std::span<const uint64_t> mixed) {
    first = mixed.front();
    last = mixed.back();
    shift = 0;
    while (((last - first) >> shift) > 0xFFFF) ++shift;
    fp.resize(mixed.size());
    for (size_t i = 0; i < mixed.size(); ++i) {
      fp[i] = static_cast<uint16_t>((mixed[i] - first) >> shift);
    }
  }
  // The records [*lo, *hi) that may hold `mixed` (inside [first, last]).
  // The values are about evenly spread (mixed keys are), so the search
  // starts where `mixed` would sit, gallops to the run and halves only the
  // last gap: a line or two of fp instead of a halving's dozen.
  void Candidates(uint64_t mixed, uint64_t* lo, uint64_t* hi) const {
    const auto v = static_cast<uint16_t>((mixed - first) >> shift);
    const size_t n = fp.size();
    if (n == 0) {
      *lo = *hi = 0;
      return;
    }
    const size_t guess = std::min<size_t>(n - 1, uint64_t{v} * n / (uint64_t{fp.back()} + 1));
    // Invariant: every value below `below` is < v; the one at `at` (when
    // below n) is >= v.
    size_t below = 0, at = n, step = 1;
    if (fp[guess] < v) {
      below = guess + 1;
      while (below + step - 1 < n && fp[below + step - 1] < v) {
        below += step;
        step *= 2;
      }
      at = std::min(n, below + step - 1);
    } else {
      at = guess;
      while (at >= step && fp[at - step] >= v) {
        at -= step;
        step *= 2;
      }
      below = at >= step ? at - step + 1 : 0;
    }
    const size_t first_at =
        static_cast<size_t>(std::lower_bound(fp.begin() + static_cast<ptrdiff_t>(below),
                                             fp.begin() + static_cast<ptrdiff_t>(at), v) -
                            fp.begin());
    size_t end = first_at;
    while (end < n && fp[end] == v) ++end;
    *lo = first_at;
    *hi = end;
  }
  uint64_t MemoryBytes() const { return sizeof(*this) + fp.capacity() * sizeof(uint16_t); }
};

// The retry state of a table's cleaning or of one key range's merges
// (docs/ssd-format.md, "Merge and cleaning errors"). A failed step changes
// nothing durable (its output slots are freed, its inputs stay current), so
// it is retried after a back-off that doubles per failure in a row, from
// RowStoreOptions::merge_retry_backoff_us up to kRetryBackoffGrowthMax times
// that; after kStuckFailures failures in a row the error is the table's
// sticky error (Store::stuck_) until a step succeeds.
using Clock = std::chrono::steady_clock;
inline constexpr uint32_t kStuckFailures = 4;
inline constexpr uint32_t kRetryBackoffGrowthMax = 64;
struct Retry {
  uint32_t failures = 0;   // in a row
  Clock::time_point at{};  // not retried before
  Status last;             // the last failure, with its context
};

// One key range of a table of key ranges (docs/ssd-format.md, "Key ranges").
struct Range {
  std::vector<BaseSegment> base;  // sorted by first, disjoint
  uint64_t base_rows = 0;         // records of its base (every one a row)
  // Rows added by the log since the base was written: exact for a key the
  // log held already, else counted against the base's directory (a put of
  // a key with a candidate there counts as an overwrite), so an estimate
  // until the next merge makes it exact.
  int64_t log_delta = 0;
  AppendPlan plan;            // of one write's append to its head
  io::AlignedBuffer staging;  // its encoding
  Retry retry;                // of its merges

  // The base segment whose key span holds `mixed`, or nullptr.
  const BaseSegment* Find(uint64_t mixed) const {
    auto it = std::upper_bound(base.begin(), base.end(), mixed,
                               [](uint64_t m, const BaseSegment& b) { return m < b.first; });
    if (it == base.begin()) return nullptr;
    --it;
    return mixed <= it->last ? &*it : nullptr;
  }
};

struct Table {
  explicit Table(SsdIndex index_kind) : index(index_kind) {}

  // Key ranges (SsdIndex::kRanges); constant after open.
  bool ranged = false;
  uint32_t range_bits = 0;
  uint32_t RangeOf(uint64_t mixed) const {
    return range_bits == 0 ? 0 : static_cast<uint32_t>(mixed >> (64 - range_bits));
  }
  uint32_t Layout(uint32_t range) const {
    return ranged ? ssd::RangesLayout(range_bits, range) : 0;
  }

  // Constant after open.
  TableSpec spec;
  uint32_t record_bytes = 0;
  uint64_t segment_bytes = 0;
  uint64_t capacity = 0;  // records per segment
  uint64_t slot_blocks = 0;
  size_t pos = 0;  // in the store's tables_
  // 4 KiB pages; set at open. Reads and writes of disjoint pages run
  // concurrently (the cleaner's I/O runs without `mu`); Truncate runs only
  // with `mu` held exclusively and no cleaning step running, and cuts only
  // free slots (a running merge's are not free).
  std::unique_ptr<PageFile> file;

  mutable base::RwLock mu;
  uint64_t file_number GUARDED_BY(mu) = 1;
  TableIndex index GUARDED_BY(mu);
  std::vector<Slot> slots GUARDED_BY(mu);
  uint64_t free_hint GUARDED_BY(mu) = 0;  // no free slot below it
  std::vector<Head> heads GUARDED_BY(mu) = std::vector<Head>(2);
  std::vector<Range> ranges GUARDED_BY(mu);  // key ranges
  uint64_t base_slots GUARDED_BY(mu) = 0;    // current, role kRoleBase
  uint64_t merge_slots GUARDED_BY(mu) = 0;   // role kRoleMergeOutput
  uint64_t next_seq GUARDED_BY(mu) = 1;
  uint64_t next_segment_seq GUARDED_BY(mu) = 1;
  uint64_t rows GUARDED_BY(mu) = 0;           // index entries that are rows
  uint64_t tombstones GUARDED_BY(mu) = 0;     // index entries that are tombstones
  uint64_t used_slots GUARDED_BY(mu) = 0;     // not free
  uint64_t current_slots GUARDED_BY(mu) = 0;  // kCurrent or kBoth
  io::AlignedBuffer staging GUARDED_BY(mu);   // encoding of one put's append
  AppendPlan plan GUARDED_BY(mu);             // of one put's append
  io::AlignedBuffer victim GUARDED_BY(mu);    // a segment being read at open
  Retry clean_retry GUARDED_BY(mu);           // of its cleaning (no key ranges)

  uint64_t Address(uint64_t slot, uint64_t index) const { return slot * capacity + index; }
  uint64_t SlotOf(uint64_t address) const { return address / capacity; }
  uint64_t IndexOf(uint64_t address) const { return address % capacity; }
  uint64_t RecordOffset(uint64_t index) const { return kHeader + index * record_bytes; }
  uint64_t FileOffset(uint64_t address) const {
    return SlotOf(address) * segment_bytes + RecordOffset(IndexOf(address));
  }
  uint64_t End(uint64_t slot) const REQUIRES_SHARED(mu) {
    return RecordOffset(slots[slot].records);
  }
  void SetState(uint64_t slot, uint8_t state) REQUIRES(mu) {
    const uint8_t old = slots[slot].state;
    used_slots += (state != kFree) - (old != kFree);
    const bool was_current = old == kCurrent || old == kBoth;
    const bool is_current = state == kCurrent || state == kBoth;
    current_slots += is_current - was_current;
    slots[slot].state = state;
    if (!is_current && slots[slot].role == kRoleBase) {
      --base_slots;
      slots[slot].role = kRoleLog;
    }
    if (state == kFree && slots[slot].role == kRoleMergeOutput) --merge_slots;
    if (state == kFree) {
      slots[slot] = Slot{};
      free_hint = std::min(free_hint, slot);
    }
  }
  // Where record `address` is held in DRAM (a head's pend), or nullptr.
  const std::byte* InPend(uint64_t address) const REQUIRES_SHARED(mu) {
    const uint64_t slot = SlotOf(address);
    const uint64_t off = RecordOffset(IndexOf(address));
    auto in = [&](const Head& h) -> const std::byte* {
      if (h.slot != static_cast<int64_t>(slot) || off < h.pend_off) return nullptr;
      return reinterpret_cast<const std::byte*>(h.pend.data()) + (off - h.pend_off);
    };
    if (ranged) {  // only its range's head appends to a log segment of a range
      const int32_t range = slots[slot].range;
      return range < 0 ? nullptr : in(heads[kRangeHead0 + range]);
    }
    for (const Head& h : heads) {
      if (const std::byte* p = in(h)) return p;
    }
    return nullptr;
  }
  // Log slots: current, neither base nor merge output (heads included).
  uint64_t LogSlots() const REQUIRES_SHARED(mu) { return current_slots - base_slots - merge_slots; }
};

struct Parsed {
  Key key = 0;
  uint64_t seq = 0;
  uint8_t kind = 0;
};

inline Parsed ParseRecord(const std::byte* src) {
  ssd::RecordHeader h;
  std::memcpy(&h, src, sizeof(h));
  return {h.key, h.seq_kind & ssd::kRecordSeqMax, static_cast<uint8_t>(h.seq_kind >> 48)};
}

// Encodes a record (a tombstone when `row` is null) at `dst`, record_bytes.
void SealRecord(std::byte* dst, const Table& t, uint64_t segment_seq, uint64_t index, Key key,
                uint64_t seq, uint8_t kind, const std::byte* row);
Status CorruptionAt(const std::string& path, uint64_t offset, const std::string& what);
// Verifies the record at `src` (record `index` of segment `segment_seq`),
// read from `path` at `offset`.
Status VerifyRecord(const std::byte* src, const Table& t, uint64_t segment_seq, uint64_t index,
                    const std::string& path, uint64_t offset, Parsed* out);
void SealSegmentHeader(std::byte* dst, const Table& t, uint64_t segment_seq, uint16_t kind,
                       uint32_t layout);
Status VerifySegmentHeader(const std::byte* src, const Table& t, uint64_t segment_seq,
                           const std::string& path, uint64_t offset);
// The key ranges of a new table, 2^this: about kSsdRangeRecordBytes of
// records each for its rows_hint, at most kRangeBitsMax; `range_bits` when
// it has none.
uint32_t RangeBitsFor(const TableSpec& spec, uint32_t range_bits);
// Grows `buf` to at least `bytes` (doubling).
Status EnsureBytes(io::AlignedBuffer* buf, size_t bytes);

// One record to append.
struct NewRecord {
  Key key;
  uint64_t seq;
  uint8_t kind;
  const std::byte* row;  // nullptr for a tombstone
};

class Store final : public RowStore {
 public:
  Store(RowStoreOptions options, io::Env* env) : options_(std::move(options)), env_(env) {}
  ~Store() override;

  Status Open(const std::vector<TableSpec>& tables);
  // Starts the background cleaner (ssd_background_cleaning), after Open.
  void StartCleaner() EXCLUDES(cleaner_mu_);

  Status MultiGet(TableId table, std::span<const Key> keys, std::span<std::byte> rows,
                  std::span<uint8_t> found) override;
  Status MultiPut(TableId table, std::span<const Key> keys,
                  std::span<const std::byte> rows) override;
  Status Delete(TableId table, std::span<const Key> keys) override;
  Status Scan(TableId table,
              const std::function<Status(Key, std::span<const std::byte>)>& fn) override;
  Status Sync() override;
  Status Checkpoint(std::span<const std::byte> meta) override;
  std::vector<std::byte> CheckpointMeta() const override {
    base::MutexLock lock(&meta_mu_);
    return meta_;
  }
  RowStoreStats Stats() const override;
  const std::vector<TableSpec>& Tables() const override { return specs_; }

 private:
  Result<Table*> Find(TableId table) const;
  Status Failed() const;
  void Fail(const Status& cause);
  bool NoteCleanup(const Status& s);
  std::unique_ptr<Table> NewTable(const TableSpec& spec, uint64_t segment_bytes);
  Status OpenExisting(const ManifestV2& manifest, const std::vector<TableSpec>& tables);
  Status Rebuild(Table& t, const ManifestTableV2& mt, const std::string& mpath) REQUIRES(t.mu);
  // Makes `t` a table of key ranges (2^range_bits) or not, with its index
  // and heads; before any record is added.
  void ConfigureLayout(Table& t, bool ranged, uint32_t range_bits) REQUIRES(t.mu);
  // Key ranges: appends `recs` (grouped by range, in that order) through
  // their ranges' heads, all or nothing; (*addrs)[i] is recs[i]'s address.
  // `meanwhile`, when given, runs while the device writes the records, with
  // *addrs set (its error fails the append as a write error would; when
  // it succeeded and the write failed, `undo_meanwhile` runs before the
  // append's slots are freed).
  Status AppendRanged(Table& t, std::span<const NewRecord> recs, std::vector<uint64_t>* addrs,
                      const std::function<Status()>& meanwhile,
                      const std::function<void()>& undo_meanwhile) REQUIRES(t.mu);
  // Writes a head's pending block(s) and seals its segment (a head with no
  // record gives its slot back).
  Status FlushHead(Table& t, Head& h) REQUIRES(t.mu);
  // One merge (key ranges; docs/ssd-format.md, "Key ranges"): when the
  // table's log exceeds its budget, the range with the most log segments is
  // merged into a new base (its base and sealed log segments read, merged
  // by key, written sorted), switched in, and the old segments freed; the
  // table lock is held to pick and to switch, not across the I/O.
  // *reclaimed: the log records freed (0: no merge); *range: the range
  // merged or tried (-1: none); *retry_at: when a range skipped for its
  // back-off may be retried (unchanged when none was). A range in its
  // back-off is not picked. On failure the merge's output slots are free
  // again and the credits it gave are taken back (the caller's part).
  Status MergeStep(Table& t, uint64_t* reclaimed, int32_t* range, Clock::time_point* retry_at)
      REQUIRES(clean_mu_) EXCLUDES(t.mu);
  // A cleaning step or, for a table of key ranges, a merge. A failure is
  // recorded in the retry state of the table or range (back-off, sticky
  // error: NoteStepFailure) and returned; a success clears it.
  Status Step(Table& t, uint64_t* reclaimed, Clock::time_point* retry_at) REQUIRES(clean_mu_)
      EXCLUDES(t.mu, cleaner_mu_);
  void NoteStepFailure(Table& t, int32_t range, const Status& s, Clock::time_point* retry_at)
      EXCLUDES(t.mu, cleaner_mu_);
  // After a successful step of `range` (-1: cleaning): clears its retry
  // state, and the table's sticky error when no range is stuck any more.
  void NoteStepSuccess(Table& t, int32_t range) EXCLUDES(t.mu, cleaner_mu_);
  // The table's sticky error, when it is over the stall bound (a put or
  // delete then is refused with it, nothing applied).
  Status StuckOverStall(Table& t) EXCLUDES(t.mu, cleaner_mu_);

  // A free slot, marked kCurrent with a new segment seq.
  Result<uint64_t> AllocateSlot(Table& t) REQUIRES(t.mu);
  // An append in four parts, so the cleaner writes without the table lock:
  // PlanAppend (under it) places `n` records through head `which`, taking
  // fresh slots, and copies the head's pending bytes into `staging`;
  // WriteAppend (no lock needed: the plan's blocks are this append's alone)
  // encodes the records and writes them; then CommitAppend (under it) sets
  // (*addrs)[i] to their addresses and moves the head, or UndoAppend frees
  // the slots taken. Only one append of a head is planned at a time.
  Status PlanAppend(Table& t, int which, size_t n, AppendPlan* plan, io::AlignedBuffer* staging)
      REQUIRES(t.mu);
  // With `gather`, the blocks to write are appended to it instead of
  // written (its data sized by the caller), so that several heads' appends
  // go to the device in one batch.
  struct WriteGather {
    std::vector<uint32_t> pages;
    std::byte* data = nullptr;
    uint64_t bytes = 0;
  };
  Status WriteAppend(const Table& t, int which, const AppendPlan& plan,
                     std::span<const NewRecord> recs, std::byte* staging,
                     WriteGather* gather = nullptr);
  void CommitAppend(Table& t, int which, const AppendPlan& plan, std::span<const NewRecord> recs,
                    const std::byte* staging, std::vector<uint64_t>* addrs) REQUIRES(t.mu);
  void UndoAppend(Table& t, const AppendPlan& plan) REQUIRES(t.mu);
  // The four under the lock. On failure nothing changed.
  Status Append(Table& t, int which, std::span<const NewRecord> recs, std::vector<uint64_t>* addrs)
      REQUIRES(t.mu);
  // Reads the records at `addrs` (from a head's pend or the device, one
  // batch) and verifies each; (*where)[i] points at record i's bytes.
  Status ReadRecords(Table& t, std::span<const uint64_t> addrs, io::AlignedBuffer* buf,
                     std::vector<const std::byte*>* where, std::vector<Parsed>* parsed)
      REQUIRES_SHARED(t.mu);
  // For each key: its entry's address (kNone: none) and record kind.
  Status Resolve(Table& t, std::span<const Key> keys, std::vector<uint64_t>* old_addrs,
                 std::vector<uint8_t>* old_kinds, io::AlignedBuffer* buf) REQUIRES(t.mu);
  Status Write(TableId table, std::span<const Key> keys, const std::byte* rows);
  // Cleaning inside a write (ssd_background_cleaning off): steps while the
  // table's segments exceed the space target, until twice the room of
  // `records` records is reclaimed (about two victims per segment of
  // records appended at space amplification 1.5).
  Status Clean(Table& t, uint64_t records) REQUIRES(clean_mu_) EXCLUDES(t.mu);
  // The table's segments exceed `space_amp` x its live row bytes.
  bool Over(const Table& t, double space_amp) const REQUIRES_SHARED(t.mu);
  bool OverTarget(const Table& t) const REQUIRES_SHARED(t.mu) {
    return Over(t, options_.gc_space_amp_trigger);
  }
  // The sealed segment with the fewest live records, or kNone.
  uint64_t PickVictim(const Table& t) const REQUIRES_SHARED(t.mu);
  // One cleaning step: while the table is over its target, copies the live
  // records of the best victim to the cleaner head and frees it, taking the
  // table lock only to pick, to plan the copies and to switch entries, not
  // across the I/O. *reclaimed: the victim's records not copied (0: no step).
  // Skipped while the table's cleaning is in its back-off (*retry_at set).
  Status CleanStep(Table& t, uint64_t* reclaimed, Clock::time_point* retry_at) REQUIRES(clean_mu_)
      EXCLUDES(t.mu);
  // The background cleaner: steps over the tables over their target, until
  // none is (then it sleeps until a write wakes it) or a checkpoint pauses
  // it; when the only steps left are in their back-off it waits for the
  // first of them.
  void CleanerThread() EXCLUDES(cleaner_mu_);
  // A write found its table over the target: wakes the cleaner.
  void WakeCleaner() EXCLUDES(cleaner_mu_);
  // Before a write of `records` records (background cleaning): when the
  // table is over the stall bound, waits for the cleaner to reclaim twice
  // that room (or to find nothing to clean); the table's sticky error when
  // it gets stuck instead (the write is then refused, nothing applied).
  Status BeforeWrite(Table& t, uint64_t records) EXCLUDES(t.mu, cleaner_mu_);
  // A background merge's progress: `records` of the log records it will
  // free count as reclaimed now (at most its log's records over the
  // merge), so that a write waiting at the stall bound waits for a part of
  // the merge about its own size, not for the whole merge.
  void Credit(const Table& t, uint64_t records) EXCLUDES(cleaner_mu_);
  void Hook(CleanPoint point) const {
    if (options_.clean_hook) options_.clean_hook(point);
  }
  // Frees a slot without live records (checkpoint-only while the durable
  // MANIFEST names it).
  void Release(Table& t, uint64_t slot) REQUIRES(t.mu);
  // Writes each head's pending block(s) and seals its segment.
  Status FlushHeads(Table& t) REQUIRES(t.mu);
  void AfterManifestSwitch(Table& t) REQUIRES(t.mu);

  const RowStoreOptions options_;
  io::Env* const env_;
  std::unique_ptr<io::IoThreads> io_threads_;
  std::vector<TableSpec> specs_;
  std::vector<std::unique_ptr<Table>> tables_;

  base::Mutex checkpoint_mu_;
  uint64_t generation_ GUARDED_BY(checkpoint_mu_) = 0;
  mutable base::Mutex meta_mu_;
  std::vector<std::byte> meta_ GUARDED_BY(meta_mu_);

  std::atomic<uint64_t> rows_read_{0}, rows_written_{0}, bytes_read_{0}, bytes_written_{0},
      user_bytes_written_{0}, cleanup_errors_{0}, merges_{0}, merge_failures_{0};

  // The cleaning lock: whoever cleans (the cleaner thread, or a write when
  // cleaning runs in the writes) holds it for a whole step, I/O included;
  // Checkpoint holds it to quiesce cleaning when a table is cleaned (not of
  // key ranges): a merge runs beside a checkpoint (its output slots are in
  // no MANIFEST until its switch). Taken before any table's mu (after
  // checkpoint_mu_).
  base::Mutex clean_mu_;
  bool checkpoint_quiesces_ = false;  // some table is cleaned; constant after open
  io::AlignedBuffer clean_victim_ GUARDED_BY(clean_mu_);   // the victim segment read
  io::AlignedBuffer clean_staging_ GUARDED_BY(clean_mu_);  // encoding of its copies
  AppendPlan clean_plan_ GUARDED_BY(clean_mu_);
  io::AlignedBuffer merge_base_ GUARDED_BY(clean_mu_);  // a base segment being merged
  // The background cleaner's state. A leaf lock: taken with or without a
  // table's mu, and nothing is taken while holding it.
  base::Mutex cleaner_mu_;
  base::CondVar cleaner_cv_;                           // wakes the cleaner
  base::CondVar progress_cv_;                          // wakes writes waiting for cleaning
  uint64_t wake_seq_ GUARDED_BY(cleaner_mu_) = 0;      // wakes so far
  bool cleaner_idle_ GUARDED_BY(cleaner_mu_) = false;  // asleep: nothing to clean
  int pauses_ GUARDED_BY(cleaner_mu_) = 0;             // checkpoints waiting or running
  bool stopping_ GUARDED_BY(cleaner_mu_) = false;
  // Per table: its sticky error (Retry), OK while none is; and its steps
  // that failed, so that a put on a stuck table waits for one more try.
  std::vector<Status> stuck_ GUARDED_BY(cleaner_mu_);
  std::vector<uint64_t> failed_steps_ GUARDED_BY(cleaner_mu_);
  std::vector<uint64_t> reclaimed_ GUARDED_BY(cleaner_mu_);  // records, per table
  // Of reclaimed_, what the running step credited before its end, per table
  // (a merge credits its log's records as its I/O progresses: Credit).
  std::vector<uint64_t> step_credit_ GUARDED_BY(cleaner_mu_);
  std::thread cleaner_;

  FsyncFailure failure_;
};

}  // namespace strata::storage::logstore
