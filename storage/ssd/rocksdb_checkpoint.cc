// RocksDB backend: options for point lookups, open and recovery (live/
// rebuilt from the last checkpoint), and checkpoints (flush, then
// rocksdb::Checkpoint, then the CHECKPOINT pointer switched atomically).
// The files under dir/ are handled in rocksdb_layout.cc.
#include <rocksdb/filter_policy.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>

#include <algorithm>
#include <cstdlib>

#include "storage/ssd/limits.h"
#include "storage/ssd/rocksdb_store.h"

namespace strata::storage::rocks {

rocksdb::ColumnFamilyOptions RocksDbRowStore::FamilyOptions() const {
  rocksdb::ColumnFamilyOptions cf;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache_;
  table.block_size = 4096;
  if (options_.rocksdb_bloom_bits_per_key > 0) {
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(options_.rocksdb_bloom_bits_per_key));
  }
  table.whole_key_filtering = true;
  // A hash index inside each data block answers point lookups without a
  // binary search of the block.
  table.data_block_index_type = rocksdb::BlockBasedTableOptions::kDataBlockBinaryAndHash;
  table.cache_index_and_filter_blocks = false;  // keep index and filters pinned
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  cf.write_buffer_size = options_.rocksdb_write_buffer_bytes;
  cf.compression = rocksdb::kNoCompression;  // embeddings do not compress
  cf.level_compaction_dynamic_level_bytes = true;
  return cf;
}

rocksdb::Options RocksDbRowStore::DbOptions() const {
  rocksdb::Options db(rocksdb::DBOptions(), FamilyOptions());
  db.create_if_missing = true;
  db.create_missing_column_families = true;
  db.use_direct_reads = direct_;
  db.use_direct_io_for_flush_and_compaction = direct_;
  db.max_background_jobs = std::max(2, options_.rocksdb_background_threads);
  db.max_open_files = -1;
  db.statistics = statistics_;
  db.env = env_;
  db.avoid_flush_during_shutdown = true;  // live/ is scratch; checkpoints are durable
  return db;
}

Result<const RocksDbRowStore::Family*> RocksDbRowStore::Find(TableId table) const {
  for (const Family& f : families_) {
    if (f.spec.id == table) return &f;
  }
  return Status::InvalidArgument(options_.dir + ": unknown table id " + std::to_string(table));
}

// live/ = the checkpoint: SST files hard-linked (immutable), the rest copied.
Status RocksDbRowStore::CloneCheckpointToLive(uint64_t gen) {
  STRATA_RETURN_IF_ERROR(RemoveDir(LiveDir()));
  STRATA_RETURN_IF_ERROR(FromRocks(env_->CreateDirIfMissing(LiveDir()), LiveDir()));
  const std::string src = CheckpointDir(gen);
  std::vector<std::string> children;
  STRATA_RETURN_IF_ERROR(FromRocks(env_->GetChildren(src, &children), src));
  for (const std::string& c : children) {
    if (c == "." || c == "..") continue;
    const std::string from = src + "/" + c;
    const std::string to = LiveDir() + "/" + c;
    if (c.size() > 4 && c.compare(c.size() - 4, 4, ".sst") == 0) {
      STRATA_RETURN_IF_ERROR(FromRocks(env_->LinkFile(from, to), from));
    } else {
      std::string data;
      STRATA_RETURN_IF_ERROR(FromRocks(rocksdb::ReadFileToString(env_, from, &data), from));
      STRATA_RETURN_IF_ERROR(
          FromRocks(rocksdb::WriteStringToFile(env_, data, to, /*should_sync=*/false), to));
    }
  }
  return Status::Ok();
}

Status RocksDbRowStore::OpenDb(const std::string& path, bool create) {
  rocksdb::Options db_options = DbOptions();
  db_options.create_if_missing = create;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, FamilyOptions());
  descriptors.emplace_back(kMetaFamily, FamilyOptions());
  for (const TableSpec& t : tables_) descriptors.emplace_back(FamilyName(t.id), FamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  STRATA_RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::Open(db_options, path, descriptors, &handles, &db), "open " + path));
  db_.reset(db);
  db_->DestroyColumnFamilyHandle(handles[0]);
  meta_family_ = handles[1];
  families_.clear();
  for (size_t i = 0; i < tables_.size(); ++i) families_.push_back({tables_[i], handles[i + 2]});
  return Status::Ok();
}

void RocksDbRowStore::CloseDb() {
  if (!db_) return;
  for (Family& f : families_) (void)db_->DestroyColumnFamilyHandle(f.handle);
  if (meta_family_ != nullptr) (void)db_->DestroyColumnFamilyHandle(meta_family_);
  families_.clear();
  meta_family_ = nullptr;
  (void)db_->Close();
  db_.reset();
}

Status RocksDbRowStore::Open() {
  STRATA_RETURN_IF_ERROR(CreateDirsSynced(env_, options_.dir));
  cache_ = rocksdb::NewLRUCache(options_.rocksdb_block_cache_bytes);
  statistics_ = rocksdb::CreateDBStatistics();
  // Nothing is written or deleted before the pointer and the directory have
  // been checked: a refused open leaves the directory as it was.
  STRATA_ASSIGN_OR_RETURN(const uint64_t generation, ReadPointer());
  std::vector<std::string> children;
  STRATA_RETURN_IF_ERROR(FromRocks(env_->GetChildren(options_.dir, &children), options_.dir));
  if (generation == 0) return CreateStore(children);  // its first Checkpoint sets generation_
  base::WriterLock lock(&write_mu_);                  // nothing else runs yet; for the analysis
  generation_ = generation;
  return OpenCheckpoint(children);
}

// A directory without a pointer: new, or left by an interrupted creation
// (CREATING present: it never held a checkpoint). Anything else is refused.
Status RocksDbRowStore::CreateStore(const std::vector<std::string>& children) {
  const std::string marker = options_.dir + "/" + kCreatingName;
  if (std::find(children.begin(), children.end(), kCreatingName) != children.end()) {
    for (const std::string& c : children) {
      if (c.rfind(kCheckpointPrefix, 0) == 0) {
        STRATA_RETURN_IF_ERROR(RemoveDir(options_.dir + "/" + c));
      }
    }
    (void)env_->DeleteFile(PointerPath() + ".tmp");
  } else {
    STRATA_RETURN_IF_ERROR(CheckNoDataWithoutPointer(children));
    STRATA_RETURN_IF_ERROR(
        FromRocks(rocksdb::WriteStringToFile(env_, "", marker, /*should_sync=*/true), marker));
    STRATA_RETURN_IF_ERROR(SyncDir(env_, options_.dir));
  }
  direct_ = DirectIoWorks(options_.dir);
  STRATA_RETURN_IF_ERROR(RemoveDir(LiveDir()));
  STRATA_RETURN_IF_ERROR(OpenDb(LiveDir(), /*create=*/true));
  rocksdb::WriteOptions wo;
  STRATA_RETURN_IF_ERROR(
      FromRocks(db_->Put(wo, meta_family_, kTablesKey, EncodeTables(tables_)), LiveDir()));
  STRATA_RETURN_IF_ERROR(Checkpoint({}));  // checkpoint 1, empty
  STRATA_RETURN_IF_ERROR(FromRocks(env_->DeleteFile(marker), marker));
  return SyncDir(env_, options_.dir);
}

Status RocksDbRowStore::OpenCheckpoint(const std::vector<std::string>& children) {
  const std::string ckpt = CheckpointDir(generation_);
  rocksdb::Status exists = env_->FileExists(ckpt);
  if (exists.IsNotFound()) {
    return Status::Corruption(PointerPath() + " names " + kCheckpointPrefix +
                              std::to_string(generation_) + ", but " + ckpt + " does not exist");
  }
  STRATA_RETURN_IF_ERROR(FromRocks(exists, ckpt));
  direct_ = DirectIoWorks(options_.dir);
  // Check the stored tables in the checkpoint, read-only, before changing anything.
  {
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, FamilyOptions());
    descriptors.emplace_back(kMetaFamily, FamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    STRATA_RETURN_IF_ERROR(
        FromRocks(rocksdb::DB::OpenForReadOnly(DbOptions(), ckpt, descriptors, &handles, &db),
                  "open " + ckpt));
    std::unique_ptr<rocksdb::DB> ro(db);
    std::string tables_text, meta_text;
    rocksdb::Status s = ro->Get(rocksdb::ReadOptions(), handles[1], kTablesKey, &tables_text);
    rocksdb::Status m = ro->Get(rocksdb::ReadOptions(), handles[1], kMetaKey, &meta_text);
    for (auto* h : handles) (void)ro->DestroyColumnFamilyHandle(h);
    STRATA_RETURN_IF_ERROR(FromRocks(s, ckpt + ": table list"));
    if (!m.ok() && !m.IsNotFound()) return FromRocks(m, ckpt + ": checkpoint meta");
    STRATA_ASSIGN_OR_RETURN(std::vector<TableSpec> stored, DecodeTables(tables_text, ckpt));
    STRATA_RETURN_IF_ERROR(CompareTableSpecs(stored, tables_, options_.dir));
    const auto* p = reinterpret_cast<const std::byte*>(meta_text.data());
    base::MutexLock meta_lock(&meta_mu_);  // nothing else runs yet; for the analysis
    meta_.assign(p, p + meta_text.size());
  }
  STRATA_RETURN_IF_ERROR(CloneCheckpointToLive(generation_));
  STRATA_RETURN_IF_ERROR(OpenDb(LiveDir(), /*create=*/false));
  // New checkpoints get numbers above every ckpt-<n> present, so making one
  // never deletes a directory that anything names.
  next_generation_ = generation_ + 1;
  for (const std::string& c : children) {
    if (c.rfind(kCheckpointPrefix, 0) != 0) continue;
    const uint64_t n = std::strtoull(c.c_str() + sizeof(kCheckpointPrefix) - 1, nullptr, 10);
    if (n < (1ull << 62)) next_generation_ = std::max(next_generation_, n + 1);
  }
  // A pointer seen after a crash may not be durable yet: fsync the directory
  // before deleting anything an older pointer could name.
  const Status synced = SyncDir(env_, options_.dir);
  // CREATING beside a pointer: a crash right after a new store's first
  // switch. Left there, it would let a lost pointer pass for a new store.
  if (std::find(children.begin(), children.end(), kCreatingName) != children.end()) {
    const std::string marker = options_.dir + "/" + kCreatingName;
    STRATA_RETURN_IF_ERROR(synced);
    STRATA_RETURN_IF_ERROR(FromRocks(env_->DeleteFile(marker), marker));
    STRATA_RETURN_IF_ERROR(SyncDir(env_, options_.dir));
  }
  if (!synced.ok()) {
    NoteCleanupError(synced);
    return Status::Ok();
  }
  RemoveObsoleteCheckpoints();
  return Status::Ok();
}

Status RocksDbRowStore::Checkpoint(std::span<const std::byte> meta) {
  if (meta.size() > kCheckpointMetaBytesMax) {
    return Status::InvalidArgument("Checkpoint: meta larger than kCheckpointMetaBytesMax");
  }
  base::WriterLock lock(&write_mu_);
  // A failed flush stops RocksDB's writes; try to resume first, so a retry
  // can succeed where RocksDB deems the error recoverable (a hard EIO stays:
  // the store then only reads, and reopening gives the last checkpoint).
  (void)db_->Resume();
  return CheckpointLocked(meta);
}

Status RocksDbRowStore::CheckpointLocked(std::span<const std::byte> meta) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  const std::string where = "Checkpoint " + options_.dir;
  STRATA_RETURN_IF_ERROR(
      FromRocks(db_->Put(wo, meta_family_, kMetaKey,
                         rocksdb::Slice(reinterpret_cast<const char*>(meta.data()), meta.size())),
                where));
  std::vector<rocksdb::ColumnFamilyHandle*> handles{meta_family_};
  for (const Family& f : families_) handles.push_back(f.handle);
  STRATA_RETURN_IF_ERROR(FromRocks(db_->Flush(rocksdb::FlushOptions(), handles), where));
  // No pointer names ckpt-<next> (see next_generation_): what is there is a
  // leftover of an attempt that failed before its rename.
  const uint64_t next = next_generation_;
  STRATA_RETURN_IF_ERROR(RemoveDir(CheckpointDir(next)));
  STRATA_RETURN_IF_ERROR(RemoveDir(CheckpointDir(next) + ".tmp"));
  rocksdb::Checkpoint* raw = nullptr;
  STRATA_RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), where));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  STRATA_RETURN_IF_ERROR(FromRocks(
      checkpoint->CreateCheckpoint(CheckpointDir(next), /*log_size_for_flush=*/0), where));
  // ckpt-<next>'s own entry is durable before a pointer names it.
  STRATA_RETURN_IF_ERROR(SyncDir(env_, options_.dir));
  bool maybe_switched = false;
  if (Status s = WritePointer(next, &maybe_switched); !s.ok()) {
    // Past the rename, either pointer may be the one a power loss leaves:
    // keep both checkpoints until a later one succeeds; never reuse `next`.
    if (maybe_switched) next_generation_ = next + 1;
    return s;
  }
  generation_ = next;
  next_generation_ = next + 1;
  {
    base::MutexLock meta_lock(&meta_mu_);
    meta_.assign(meta.begin(), meta.end());
  }
  // The checkpoint is durable whatever happens here.
  RemoveObsoleteCheckpoints();
  return Status::Ok();
}

}  // namespace strata::storage::rocks
