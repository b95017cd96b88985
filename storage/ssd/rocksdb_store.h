// Internal to the RocksDB backend (rocksdb_row_store.cc: data path and
// stats; rocksdb_checkpoint.cc: options, open, checkpoints;
// rocksdb_layout.cc: the files under dir/). The layout and the durability
// argument are in rocksdb_row_store.h and docs/ssd-format.md.
//
// Thread safety: as RowStore; writers hold write_mu_ shared and Checkpoint
// holds it exclusively. Ownership: the store owns its database and handles.
#pragma once

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/statistics.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "storage/ssd/row_store.h"
#include "storage/ssd/row_store_factory.h"

namespace strata::storage::rocks {

inline constexpr char kMetaFamily[] = "strata_meta";
inline constexpr char kTablesKey[] = "tables";
inline constexpr char kMetaKey[] = "checkpoint_meta";
inline constexpr char kPointerName[] = "CHECKPOINT";
// Present while a new store is being created (until its first pointer is
// durable): a directory with it and no pointer holds no checkpoint.
inline constexpr char kCreatingName[] = "CREATING";
inline constexpr char kCheckpointPrefix[] = "ckpt-";

// A Status from RocksDB's, the message prefixed by `what`.
Status FromRocks(const rocksdb::Status& s, const std::string& what);
// Keys as 8 bytes big endian, so scans run in key order.
void EncodeKey(Key key, char out[8]);
Key DecodeKey(const char* in);
// Table specs as "id row_bytes name" lines (stored in kMetaFamily).
std::string EncodeTables(const std::vector<TableSpec>& tables);
Result<std::vector<TableSpec>> DecodeTables(const std::string& text, const std::string& where);
std::string FamilyName(TableId id);
// O_DIRECT works in `dir` (tmpfs refuses it).
bool DirectIoWorks(const std::string& dir);
// fsync of directory `dir`: makes creations, renames and deletions in it durable.
Status SyncDir(rocksdb::Env* env, const std::string& dir);
// Creates `path` and every missing parent, fsyncing each new directory's
// parent so its entry is durable; an existing directory is left as it is.
Status CreateDirsSynced(rocksdb::Env* env, const std::string& path);

class RocksDbRowStore final : public RowStore {
 public:
  RocksDbRowStore(RowStoreOptions options, std::vector<TableSpec> tables)
      : options_(std::move(options)),
        tables_(std::move(tables)),
        env_(options_.rocksdb_env != nullptr ? options_.rocksdb_env : rocksdb::Env::Default()) {}

  ~RocksDbRowStore() override { CloseDb(); }

  Status Open();

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
  const std::vector<TableSpec>& Tables() const override { return tables_; }

 private:
  struct Family {
    TableSpec spec;
    rocksdb::ColumnFamilyHandle* handle = nullptr;
  };

  std::string LiveDir() const { return options_.dir + "/live"; }
  std::string PointerPath() const { return options_.dir + "/" + kPointerName; }
  std::string CheckpointDir(uint64_t gen) const {
    return options_.dir + "/" + kCheckpointPrefix + std::to_string(gen);
  }
  rocksdb::Options DbOptions() const;
  rocksdb::ColumnFamilyOptions FamilyOptions() const;
  Result<const Family*> Find(TableId table) const;

  // rocksdb_layout.cc.
  // The generation CHECKPOINT names; 0 when there is no pointer. Anything but
  // "ckpt-<n>\n" (n >= 1, decimal, no leading zero) is Corruption naming the
  // file and its content.
  Result<uint64_t> ReadPointer() const;
  // Replaces CHECKPOINT atomically (write and sync a temporary, rename, fsync
  // dir). `*maybe_switched` is set once the rename was tried: after that a
  // failure leaves either pointer possibly durable.
  Status WritePointer(uint64_t gen, bool* maybe_switched);
  // Corruption unless `children` (of dir/) hold no checkpoint data: a store
  // without its pointer is never taken for a new one.
  Status CheckNoDataWithoutPointer(const std::vector<std::string>& children) const;
  Status RemoveDir(const std::string& dir);
  // Deletes every ckpt-* entry but ckpt-<generation_>; never fails: an error
  // is counted and logged once, and the next checkpoint or open tries again.
  // REQUIRES: the pointer naming generation_ is durable.
  void RemoveObsoleteCheckpoints() REQUIRES(write_mu_);
  void NoteCleanupError(const Status& s);

  // rocksdb_checkpoint.cc.
  Status CreateStore(const std::vector<std::string>& children);
  Status OpenCheckpoint(const std::vector<std::string>& children) REQUIRES(write_mu_);
  Status CloneCheckpointToLive(uint64_t gen);
  Status OpenDb(const std::string& path, bool create);
  void CloseDb();
  Status CheckpointLocked(std::span<const std::byte> meta) REQUIRES(write_mu_);

  const RowStoreOptions options_;
  const std::vector<TableSpec> tables_;
  rocksdb::Env* const env_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  bool direct_ = false;

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<Family> families_;
  rocksdb::ColumnFamilyHandle* meta_family_ = nullptr;
  // Writers hold it shared, Checkpoint exclusively: a checkpoint sees no
  // write half-applied across column families.
  base::SharedMutex write_mu_;
  // The last checkpoint switched to durably (0: none yet).
  uint64_t generation_ GUARDED_BY(write_mu_) = 0;
  // The number of the next checkpoint: above every ckpt-<n> that a pointer on
  // disk may name (after a failure past the pointer's rename, the new one may
  // be durable as well as the old), so making it never deletes one.
  uint64_t next_generation_ GUARDED_BY(write_mu_) = 1;
  mutable base::Mutex meta_mu_;
  std::vector<std::byte> meta_ GUARDED_BY(meta_mu_);

  std::atomic<uint64_t> rows_read_{0}, rows_written_{0}, user_bytes_written_{0};
  std::atomic<uint64_t> cleanup_errors_{0};
  std::atomic<bool> cleanup_error_logged_{false};
};

}  // namespace strata::storage::rocks
