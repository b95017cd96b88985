// Internal state of the native store (native_row_store*.cc): one table's
// data file, directory and page bookkeeping, and the store class itself.
//
// Page states: a physical page is free, referenced by both the durable
// checkpoint and the current directory (kBoth), by the current directory only
// (kCurrent: written since the checkpoint), or by the checkpoint only
// (kCheckpointOnly: replaced since; reusable after the next checkpoint).
// Only free pages are ever written.
//
// Thread safety: Table fields are guarded by Table::mu (shared for reads).
// Ownership: the store owns its tables; a table owns its PageFile.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "io/aligned.h"
#include "io/env.h"
#include "storage/ssd/log_index.h"
#include "storage/ssd/manifest.h"
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

  // Write log (native_log.cc): rows put since the last merge, newer than the
  // leaves. Record numbers count from 0 in each merge cycle (`log_epoch`).
  std::unique_ptr<PageFile> log GUARDED_BY(mu);  // units of log_layout.unit_bytes
  LogIndex log_index GUARDED_BY(mu);
  uint64_t log_epoch GUARDED_BY(mu) = 0;
  uint64_t log_records GUARDED_BY(mu) = 0;  // next record number (before unit rounding)
  uint64_t log_entries GUARDED_BY(mu) = 0;  // records and tombstones of this cycle
  uint64_t log_rows GUARDED_BY(mu) = 0;     // index entries that are rows, not tombstones
  uint64_t log_units GUARDED_BY(mu) = 0;    // units the log file holds

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

class Store final : public RowStore {
 public:
  Store(RowStoreOptions options, io::Env* env) : options_(std::move(options)), env_(env) {}

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
  struct Op {
    uint64_t mixed;
    uint32_t index;  // into the caller's keys/rows
  };
  struct Group {  // the ops of one round that fall in one leaf
    uint64_t low;
    uint32_t old_page;
    size_t begin, end;  // into ops
  };

  // The table with id `table`, or the store's sticky error (Failed()).
  Result<Table*> Find(TableId table) const EXCLUDES(failed_mu_);
  // OK, or the sticky error set by Fail(): after a failed fsync of a data
  // file the kernel may have dropped the written pages, so neither reads of
  // pages written since the last checkpoint nor a new checkpoint can be
  // trusted; every later call returns this error and reopening the directory
  // gives the last checkpoint, exactly.
  Status Failed() const;
  void Fail(const Status& cause) EXCLUDES(failed_mu_);
  Status ApplyWrites(Table& t, std::span<const Key> keys, const std::byte* rows);
  // Writes rows (nullptr: deletes) into the leaves, copy-on-write; `user`:
  // counted as bytes handed to MultiPut (false for a merge of the log).
  Status ApplyToLeaves(Table& t, std::span<const Key> keys, const std::byte* rows, bool user)
      REQUIRES(t.mu);
  Status WriteRound(Table& t, std::span<const Key> keys, const std::byte* rows,
                    std::span<const Op> ops, std::span<const Group> groups, bool user)
      REQUIRES(t.mu);
  // Write log (native_log.cc).
  Status OpenLog(Table& t) REQUIRES(t.mu);
  Status AppendToLog(Table& t, std::span<const Key> keys, const std::byte* rows) REQUIRES(t.mu);
  // Folds the log into the leaves in mixed-key order and starts a new cycle.
  // A failure leaves the log index whole (its rows are still the newest).
  Status MergeLog(Table& t) REQUIRES(t.mu);
  void StartLogCycle(Table& t) REQUIRES(t.mu);
  // Reads the rows of wants (record number, index into keys) from the log.
  struct LogWant {
    uint32_t record;
    uint32_t index;
  };
  Status ReadFromLog(Table& t, std::span<const Key> keys, std::span<LogWant> wants, std::byte* rows,
                     uint8_t* found) REQUIRES_SHARED(t.mu);
  Status ReadVerified(Table& t, std::span<const uint32_t> pages, std::span<const uint64_t> lows,
                      io::AlignedBuffer* buf) REQUIRES_SHARED(t.mu);
  bool GcDue(const Table& t) const REQUIRES_SHARED(t.mu);
  Status CollectGarbage(Table& t) REQUIRES(t.mu);
  // After a durable switch: pages only the old MANIFEST referenced become
  // free, obsolete files are deleted and the data file is truncated. Errors
  // there are counted (cleanup_errors_), not returned: the checkpoint is
  // durable, and what was not deleted is retried at the next switch (or
  // deleted by recovery at open).
  void AfterManifestSwitch(Table& t) REQUIRES(t.mu);
  // After a switch left in doubt: every page the attempted MANIFEST
  // references is kept as if a checkpoint referenced it.
  void AfterSwitchInDoubt(Table& t) REQUIRES(t.mu);
  Status RefuseOrphanedData();
  Status OpenExisting(const Manifest& manifest, const std::vector<TableSpec>& tables);

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

  std::atomic<bool> failed_{false};
  mutable base::Mutex failed_mu_;
  Status failed_status_ GUARDED_BY(failed_mu_);
};

}  // namespace strata::storage::native
