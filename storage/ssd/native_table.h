// Internal state of the native store (native_row_store*.cc): one table's
// data file, directory and page bookkeeping, and the store class itself.
//
// Page states: a physical page is free, referenced by both the durable
// checkpoint and the current directory (kBoth), by the current directory only
// (kCurrent: written since the checkpoint), or by the checkpoint only
// (kCheckpointOnly: replaced since; reusable after the next checkpoint).
// Only free pages are ever written.
//
// Thread safety: Table fields are guarded by Table::mu (shared for reads);
// Table::merge_mu makes one thread at a time the table's leaf writer (the
// background merge thread, or a put, Scan or Checkpoint merging the logs),
// which reads and writes pages without mu and takes mu to switch them in.
// Ownership: the store owns its tables; a table owns its PageFile.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "io/aligned.h"
#include "io/env.h"
#include "storage/ssd/log_index.h"
#include "storage/ssd/manifest.h"
#include "storage/ssd/native_common.h"
#include "storage/ssd/page_directory.h"
#include "storage/ssd/page_file.h"
#include "storage/ssd/row_store.h"
#include "storage/ssd/row_store_factory.h"

namespace strata::storage::native {

// Per-thread aligned scratch buffers of the hot paths (MultiGet: slot 0,
// writes: slots 1 and 2), kept between calls so steady-state gets and puts do
// not allocate. Scan and garbage collection use their own buffers, so a Scan
// callback may call MultiGet.
enum ScratchSlot { kGetScratch = 0, kWriteInScratch = 1, kWriteOutScratch = 2 };
io::AlignedBuffer* ThreadScratch(ScratchSlot slot);
// Grows `*buf` to at least `bytes` (contents not kept).
[[nodiscard]] Status EnsureBytes(io::AlignedBuffer* buf, size_t bytes);

enum PageState : uint8_t { kFree = 0, kBoth = 1, kCurrent = 2, kCheckpointOnly = 3 };

// One write log of a table (docs/ssd-format.md, "Write log"): a file of
// units of LogLayout::unit_bytes. Record numbers count from 0 in each cycle
// (`epoch`). The table's LogIndex holds the rows of both logs.
enum class LogState : uint8_t { kReady, kActive, kFrozen, kRetired };
struct WriteLog {
  std::unique_ptr<PageFile> file;
  LogState state = LogState::kReady;
  uint64_t epoch = 0;
  uint64_t records = 0;  // next record number: records are numbered without gaps
  uint64_t entries = 0;  // records and tombstones appended this cycle
  uint64_t rows = 0;     // index entries of this log that are rows
  uint64_t units = 0;    // units written to the file (whole units only)
  // The unit after the written ones, while partly filled: its records
  // [units x records_per_unit, records) are held here, encoded, and written
  // with the next append that fills the unit (so no written unit is ever
  // rewritten, and small appends share units). Gets and the merge read them
  // here. The log is never part of a checkpoint, so holding them in DRAM
  // loses nothing a reopen would keep.
  std::vector<std::byte> tail;
};

// LogIndex values: a record number or kTombstone, with kLogBit set for log 1.
inline uint32_t LogValue(uint32_t which, uint32_t record) {
  return record | (which != 0 ? LogIndex::kLogBit : 0);
}
inline uint32_t LogOf(uint32_t value) { return (value & LogIndex::kLogBit) != 0 ? 1 : 0; }
inline uint32_t RecordOf(uint32_t value) { return value & ~LogIndex::kLogBit; }

struct Table {
  // Constant after open.
  TableSpec spec;
  uint32_t page_bytes = 0;
  uint32_t capacity = 0;  // rows per page
  ssd::LogLayout log_layout;

  mutable base::RwLock mu;
  uint64_t file_number GUARDED_BY(mu) = 0;
  std::unique_ptr<PageFile> file GUARDED_BY(mu);
  PageDirectory dir GUARDED_BY(mu);
  uint64_t row_count GUARDED_BY(mu) = 0;
  std::vector<uint8_t> page_state GUARDED_BY(mu);          // PageState per physical page
  uint32_t free_hint GUARDED_BY(mu) = 0;                   // no free page below it
  std::vector<std::string> obsolete_paths GUARDED_BY(mu);  // delete after the next manifest switch

  // Write logs (native_log.cc): two per table, so puts go on into one while
  // the other is merged into the leaves in the background. logs[active] takes
  // the appends; the other is kReady (empty), kFrozen (being merged: newer
  // than the leaves, older than the active log) or kRetired (merged; being
  // emptied). One index maps each key to its newest log entry (LogValue);
  // the merge erases a frozen entry once its row is in the leaves, so the
  // active log can grow into the room a merge frees. Epochs count log
  // cycles over both logs (record seeds).
  WriteLog logs[2] GUARDED_BY(mu);
  LogIndex log_index GUARDED_BY(mu);
  uint32_t active GUARDED_BY(mu) = 0;
  uint64_t log_epoch GUARDED_BY(mu) = 0;  // the last epoch given to a log

  // The leaf writer: held by whoever changes the leaves while the log is on
  // (the background merge, a put that runs a merge, Scan, Checkpoint and
  // its garbage collection, a batch larger than the log index), across
  // their I/O, so the directory, the page states and the data file change
  // only under it and `mu`, and a frozen log's file only under it. Taken
  // before `mu`, never while holding it.
  base::Mutex merge_mu;
  // Counts merge rounds and releases of merge_mu: a put waiting for room in
  // the log index waits for it to move. Taken after `mu`.
  base::Mutex progress_mu;
  base::CondVar progress_cv;
  uint64_t merge_progress GUARDED_BY(progress_mu) = 0;
  // A frozen log is queued for (or being merged by) the merge thread, which
  // then moves merge_progress: a put waiting for room waits for it rather
  // than merging itself.
  bool merge_queued GUARDED_BY(progress_mu) = false;

  WriteLog& Active() REQUIRES_SHARED(mu) { return logs[active]; }
  WriteLog& Other() REQUIRES_SHARED(mu) { return logs[1 - active]; }
  uint64_t Progress(bool* queued) EXCLUDES(progress_mu) {
    base::MutexLock lock(&progress_mu);
    *queued = merge_queued;
    return merge_progress;
  }
  void SetMergeQueued(bool queued) EXCLUDES(progress_mu) {
    base::MutexLock lock(&progress_mu);
    merge_queued = queued;
  }
  void NotifyProgress() EXCLUDES(progress_mu) {
    base::MutexLock lock(&progress_mu);
    ++merge_progress;
    progress_cv.SignalAll();
  }
  // Waits until merge_progress differs from `seen`.
  void WaitProgress(uint64_t seen) EXCLUDES(progress_mu) {
    base::MutexLock lock(&progress_mu);
    while (merge_progress == seen) progress_cv.Wait(&progress_mu);
  }

  uint8_t* KeysOf(std::byte* page) const {
    return reinterpret_cast<uint8_t*>(page) + ssd::kPageHeaderBytes;
  }
  uint64_t KeyAt(const std::byte* page, uint32_t slot) const;
  const std::byte* RowAt(const std::byte* page, uint32_t slot) const {
    return page + ssd::kPageHeaderBytes + uint64_t{capacity} * 8 + uint64_t{slot} * spec.row_bytes;
  }
  uint16_t CountOf(const std::byte* page) const;

  // REQUIRES: mu held exclusively.
  Result<std::vector<uint32_t>> Allocate(size_t n) REQUIRES(mu);
  void Unallocate(std::span<const uint32_t> pages) REQUIRES(mu);
  void Release(uint32_t page) REQUIRES(mu);
};

// Holds a table's merge lock for a scope; its release wakes puts waiting
// for room in the log index.
class SCOPED_CAPABILITY MergeLock {
 public:
  explicit MergeLock(Table* t) ACQUIRE(t->merge_mu) : t_(t) { t_->merge_mu.Lock(); }
  ~MergeLock() RELEASE() {
    t_->merge_mu.Unlock();
    t_->NotifyProgress();
  }
  MergeLock(const MergeLock&) = delete;
  MergeLock& operator=(const MergeLock&) = delete;

 private:
  Table* const t_;
};

class Store final : public RowStore {
 public:
  Store(RowStoreOptions options, io::Env* env) : options_(std::move(options)), env_(env) {}
  // Stops the background merge (waiting for a merge in progress).
  ~Store() override;

  Status Open(const std::vector<TableSpec>& tables);

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
  struct Op {  // one row to write into the leaves
    uint64_t mixed;
    Key key;
    const std::byte* row;  // nullptr: delete the key
    uint32_t log_value;    // a merge's: the LogIndex value it folds (erased at the switch)
  };
  struct Group {  // the ops of one round that fall in one leaf
    uint64_t low;
    uint32_t old_page;
    uint32_t old_rows;  // the leaf's row count in the directory
    size_t begin, end;  // into ops
  };
  struct Slot {  // a row of a leaf being rebuilt
    uint64_t mixed;
    Key key;
    const std::byte* row;
  };
  // One round of leaf rewrites (native_write.cc): planned from the old pages
  // (PlanRound), given pages (Table::Allocate), written (WriteRoundPages),
  // switched into the directory (SwitchRound).
  struct Round {
    std::vector<Slot> merged;          // every group's rows after the round
    std::vector<size_t> merged_begin;  // per group, into merged (one more at the end)
    std::vector<uint8_t> changed;      // per group: its leaf is rewritten
    std::vector<uint32_t> pieces;      // per group: pages of its new leaves
    size_t new_pages = 0;
    int64_t row_delta = 0;
    uint64_t put_rows = 0;                             // ops that wrote a row
    std::vector<uint32_t> pages;                       // allocated, new_pages of them
    std::vector<std::vector<ssd::LeafRecord>> leaves;  // per changed group
  };

  // The table with id `table`, or the store's sticky error (Failed()).
  Result<Table*> Find(TableId table) const;
  // OK, or the sticky error set by Fail(): after a failed fsync of a data
  // file the kernel may have dropped the written pages, so neither reads of
  // pages written since the last checkpoint nor a new checkpoint can be
  // trusted; every later call returns this error and reopening the directory
  // gives the last checkpoint, exactly.
  Status Failed() const;
  void Fail(const Status& cause);
  Status ApplyWrites(Table& t, std::span<const Key> keys, const std::byte* rows);
  // Writes rows (nullptr: deletes) into the leaves, copy-on-write; `user`:
  // counted as bytes handed to MultiPut (false for a merge of the log).
  Status ApplyToLeaves(Table& t, std::span<const Key> keys, const std::byte* rows, bool user)
      REQUIRES(t.mu);
  // Groups ops[pos, ...) by leaf into `*groups` (one round: at most
  // `leaves_max` leaves); returns the end of the round in ops. REQUIRES: ops
  // sorted by mixed key, unique.
  size_t GroupRound(Table& t, std::span<const Op> ops, size_t pos, std::vector<Group>* groups,
                    uint32_t leaves_max) REQUIRES_SHARED(t.mu);
  // Pages the round of `groups` writes at most (before reading its leaves).
  size_t RoundPagesMax(const Table& t, std::span<const Op> ops, std::span<const Group> groups);
  // Reads the groups' leaves from `file` and merges their ops into `*r`.
  // Touches no guarded field: the caller is the leaf writer.
  Status PlanRound(Table& t, PageFile* file, std::span<const Op> ops, std::span<const Group> groups,
                   Round* r);
  // Builds the new leaves of `*r` into its pages of `file` and writes them.
  Status WriteRoundPages(Table& t, PageFile* file, std::span<const Group> groups, Round* r);
  // Switches the round's leaves into the directory. A merge's round
  // (`ops` given) also erases the log index entries it folded.
  void SwitchRound(Table& t, std::span<const Group> groups, const Round& r, bool user,
                   std::span<const Op> merged_ops = {}) REQUIRES(t.mu);
  // One round with t.mu held throughout.
  Status WriteRound(Table& t, std::span<const Op> ops, std::span<const Group> groups, bool user)
      REQUIRES(t.mu);
  Status ReadVerifiedFrom(Table& t, PageFile* file, std::span<const uint32_t> pages,
                          std::span<const uint64_t> lows, io::AlignedBuffer* buf);
  Status ReadVerified(Table& t, std::span<const uint32_t> pages, std::span<const uint64_t> lows,
                      io::AlignedBuffer* buf) REQUIRES_SHARED(t.mu);

  // Write logs (native_log.cc).
  Status OpenLogs(Table& t) REQUIRES(t.mu);
  // Entries the log index holds for a table of `rows` rows.
  uint64_t LogBudget(uint64_t rows) const;
  enum class Append { kDone, kWait, kTooBig };
  // Appends to the active log, first freezing it for the background merge
  // once the batch would take its entries past the index's budget and the
  // other log is ready.
  // kWait: no room in the index until the merge frees some (nothing
  // written; `*progress`: the table's merge progress seen, `*queued`: the
  // merge thread has the merge in hand); kTooBig: the batch is larger than
  // the whole index.
  Result<Append> AppendToLog(Table& t, std::span<const Key> keys, const std::byte* rows,
                             uint64_t* progress, bool* queued) REQUIRES(t.mu);
  // Makes the active log frozen and the ready one active; `notify` queues
  // the frozen log for the background merge. REQUIRES: Other() kReady.
  void Freeze(Table& t, bool notify) REQUIRES(t.mu);
  // Re-sizes the log index when the table's budget moved by a quarter.
  void ResizeLogIndex(Table& t) REQUIRES(t.mu);
  // Merges the frozen log, if any, into the leaves in mixed-key order, taking
  // t.mu only briefly (index lookups, one allocation and one directory switch
  // per round), so gets and puts go on meanwhile; then empties it (kReady).
  // A failure leaves it frozen with the entries not yet merged (they are
  // still newer than the leaves) for a retry.
  Status MergeFrozen(Table& t) REQUIRES(t.merge_mu) EXCLUDES(t.mu);
  // Writes `ops` (sorted by mixed key, unique) into the leaves, round by round.
  Status MergeOps(Table& t, std::span<const Op> ops) REQUIRES(t.merge_mu) EXCLUDES(t.mu);
  // Merges both logs: the leaves then hold every write made before the call.
  Status DrainLogs(Table& t) REQUIRES(t.merge_mu) EXCLUDES(t.mu);
  // Reads the rows of wants (record number, index into keys) from `log`.
  struct LogWant {
    uint32_t record;
    uint32_t index;
  };
  Status ReadFromLog(Table& t, const WriteLog& log, std::span<const Key> keys,
                     std::span<LogWant> wants, std::byte* rows, uint8_t* found)
      REQUIRES_SHARED(t.mu);
  void MergeThread() EXCLUDES(merge_queue_mu_);
  // Starts MergeThread when the store has write logs (end of Open).
  void StartMergeThread();
  void Hook(LogMergePoint point) const {
    if (options_.log_merge_hook) options_.log_merge_hook(point);
  }

  bool GcDue(const Table& t) const REQUIRES_SHARED(t.mu);
  Status CollectGarbage(Table& t) REQUIRES(t.merge_mu, t.mu);
  // After a durable switch: pages only the old MANIFEST referenced become
  // free, obsolete files are deleted and the data file is truncated. Errors
  // there are counted (cleanup_errors_), not returned: the checkpoint is
  // durable, and what was not deleted is retried at the next switch (or
  // deleted by recovery at open).
  void AfterManifestSwitch(Table& t) REQUIRES(t.mu);
  // After a switch left in doubt: every page the attempted MANIFEST
  // references is kept as if a checkpoint referenced it.
  void AfterSwitchInDoubt(Table& t) REQUIRES(t.mu);
  Status OpenExisting(const Manifest& manifest, const std::vector<TableSpec>& tables);
  // Counts a cleanup error, logging the first.
  bool NoteCleanup(const Status& s);

  const RowStoreOptions options_;
  io::Env* const env_;
  std::unique_ptr<io::IoThreads> io_threads_;  // null: File::Read/Write
  std::vector<TableSpec> specs_;
  std::vector<std::unique_ptr<Table>> tables_;

  base::Mutex checkpoint_mu_;
  uint64_t generation_ GUARDED_BY(checkpoint_mu_) = 0;
  uint64_t manifest_bytes_ = 0;
  mutable base::Mutex meta_mu_;
  std::vector<std::byte> meta_ GUARDED_BY(meta_mu_);

  std::atomic<uint64_t> rows_read_{0}, rows_written_{0}, bytes_read_{0}, bytes_written_{0},
      user_bytes_written_{0}, cleanup_errors_{0};

  // Background merge: tables whose log froze, and the thread merging them.
  base::Mutex merge_queue_mu_;
  base::CondVar merge_queue_cv_;
  std::vector<Table*> merge_queue_ GUARDED_BY(merge_queue_mu_);
  bool stopping_ GUARDED_BY(merge_queue_mu_) = false;
  std::thread merge_thread_;

  FsyncFailure failure_;
};

}  // namespace strata::storage::native
