#include "storage/rocksdb_row_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <shared_mutex>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>

#include "storage/limits.h"

namespace strata::storage {
namespace {

constexpr char kMetaFamily[] = "strata_meta";
constexpr char kTablesKey[] = "tables";
constexpr char kMetaKey[] = "checkpoint_meta";
constexpr char kPointerName[] = "CHECKPOINT";

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  const std::string msg = what + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(msg);
  if (s.IsInvalidArgument()) return Status::InvalidArgument(msg);
  if (s.IsNoSpace()) return Status::ResourceExhausted(msg);
  return Status::IOError(msg);
}

void EncodeKey(Key key, char out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(key >> (56 - 8 * i));
}
Key DecodeKey(const char* in) {
  Key key = 0;
  for (int i = 0; i < 8; ++i) key = (key << 8) | static_cast<uint8_t>(in[i]);
  return key;
}

// Table specs as "id row_bytes name\n" lines.
std::string EncodeTables(const std::vector<TableSpec>& tables) {
  std::string out;
  for (const TableSpec& t : tables) {
    out += std::to_string(t.id) + " " + std::to_string(t.row_bytes) + " " + t.name + "\n";
  }
  return out;
}
Result<std::vector<TableSpec>> DecodeTables(const std::string& text, const std::string& where) {
  std::vector<TableSpec> tables;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    const size_t s1 = text.find(' ', pos);
    const size_t s2 = s1 == std::string::npos ? s1 : text.find(' ', s1 + 1);
    if (end == std::string::npos || s2 == std::string::npos || s2 > end) {
      return Status::Corruption(where + ": malformed table list");
    }
    TableSpec t;
    t.id = static_cast<TableId>(std::stoul(text.substr(pos, s1 - pos)));
    t.row_bytes = static_cast<uint32_t>(std::stoul(text.substr(s1 + 1, s2 - s1 - 1)));
    t.name = text.substr(s2 + 1, end - s2 - 1);
    tables.push_back(std::move(t));
    pos = end + 1;
  }
  return tables;
}

std::string FamilyName(TableId id) { return "t" + std::to_string(id); }

// O_DIRECT works in `dir` (tmpfs refuses it).
bool DirectIoWorks(const std::string& dir) {
  const std::string probe = dir + "/.direct_probe";
  const int fd = ::open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

class RocksDbRowStore final : public RowStore {
 public:
  RocksDbRowStore(RowStoreOptions options, std::vector<TableSpec> tables)
      : options_(std::move(options)), tables_(std::move(tables)), env_(rocksdb::Env::Default()) {}

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
    std::lock_guard lock(meta_mu_);
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
  std::string CheckpointDir(uint64_t gen) const {
    return options_.dir + "/ckpt-" + std::to_string(gen);
  }
  rocksdb::Options DbOptions() const;
  rocksdb::ColumnFamilyOptions FamilyOptions() const;
  Result<const Family*> Find(TableId table) const;
  Status ReadPointer(uint64_t* gen) const;
  Status WritePointer(uint64_t gen);
  Status RemoveDir(const std::string& dir);
  Status CloneCheckpointToLive(uint64_t gen);
  Status OpenDb(const std::string& path, bool create);
  void CloseDb();

  const RowStoreOptions options_;
  const std::vector<TableSpec> tables_;
  rocksdb::Env* const env_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::shared_ptr<rocksdb::Statistics> statistics_;
  bool direct_ = false;

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<Family> families_;
  rocksdb::ColumnFamilyHandle* meta_family_ = nullptr;
  uint64_t generation_ = 0;

  // Writers hold it shared, Checkpoint exclusively: a checkpoint sees no
  // write half-applied across column families.
  std::shared_mutex write_mu_;
  mutable std::mutex meta_mu_;
  std::vector<std::byte> meta_;  // guarded by meta_mu_

  std::atomic<uint64_t> rows_read_{0}, rows_written_{0}, user_bytes_written_{0};
};

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
  db.avoid_flush_during_shutdown = true;  // live/ is scratch; checkpoints are durable
  return db;
}

Result<const RocksDbRowStore::Family*> RocksDbRowStore::Find(TableId table) const {
  for (const Family& f : families_) {
    if (f.spec.id == table) return &f;
  }
  return Status::InvalidArgument(options_.dir + ": unknown table id " + std::to_string(table));
}

Status RocksDbRowStore::ReadPointer(uint64_t* gen) const {
  std::string text;
  rocksdb::Status s =
      rocksdb::ReadFileToString(env_, options_.dir + "/" + kPointerName, &text);
  if (s.IsNotFound() || s.IsPathNotFound()) {
    *gen = 0;
    return Status::Ok();
  }
  STRATA_RETURN_IF_ERROR(FromRocks(s, options_.dir + "/" + kPointerName));
  if (text.rfind("ckpt-", 0) != 0 || text.back() != '\n') {
    return Status::Corruption(options_.dir + "/" + kPointerName + " at offset 0: malformed");
  }
  *gen = std::stoull(text.substr(5));
  return Status::Ok();
}

Status RocksDbRowStore::WritePointer(uint64_t gen) {
  const std::string path = options_.dir + "/" + kPointerName;
  const std::string text = "ckpt-" + std::to_string(gen) + "\n";
  STRATA_RETURN_IF_ERROR(FromRocks(
      rocksdb::WriteStringToFile(env_, text, path + ".tmp", /*should_sync=*/true), path));
  STRATA_RETURN_IF_ERROR(FromRocks(env_->RenameFile(path + ".tmp", path), path));
  std::unique_ptr<rocksdb::Directory> dir;
  STRATA_RETURN_IF_ERROR(FromRocks(env_->NewDirectory(options_.dir, &dir), options_.dir));
  return FromRocks(dir->Fsync(), options_.dir);
}

Status RocksDbRowStore::RemoveDir(const std::string& dir) {
  if (!env_->FileExists(dir).ok()) return Status::Ok();
  std::vector<std::string> children;
  STRATA_RETURN_IF_ERROR(FromRocks(env_->GetChildren(dir, &children), dir));
  for (const std::string& c : children) {
    if (c == "." || c == "..") continue;
    STRATA_RETURN_IF_ERROR(FromRocks(env_->DeleteFile(dir + "/" + c), dir + "/" + c));
  }
  return FromRocks(env_->DeleteDir(dir), dir);
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
  STRATA_RETURN_IF_ERROR(FromRocks(
      rocksdb::DB::Open(db_options, path, descriptors, &handles, &db), "open " + path));
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
  STRATA_RETURN_IF_ERROR(FromRocks(env_->CreateDirIfMissing(options_.dir), options_.dir));
  direct_ = DirectIoWorks(options_.dir);
  cache_ = rocksdb::NewLRUCache(options_.rocksdb_block_cache_bytes);
  statistics_ = rocksdb::CreateDBStatistics();
  STRATA_RETURN_IF_ERROR(ReadPointer(&generation_));
  if (generation_ == 0) {  // fresh store: empty live DB, then checkpoint 1
    STRATA_RETURN_IF_ERROR(RemoveDir(LiveDir()));
    STRATA_RETURN_IF_ERROR(OpenDb(LiveDir(), /*create=*/true));
    rocksdb::WriteOptions wo;
    STRATA_RETURN_IF_ERROR(
        FromRocks(db_->Put(wo, meta_family_, kTablesKey, EncodeTables(tables_)), LiveDir()));
    return Checkpoint({});
  }
  // Check the stored tables in the checkpoint, read-only, before changing anything.
  {
    const std::string ckpt = CheckpointDir(generation_);
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    descriptors.emplace_back(rocksdb::kDefaultColumnFamilyName, FamilyOptions());
    descriptors.emplace_back(kMetaFamily, FamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    STRATA_RETURN_IF_ERROR(FromRocks(
        rocksdb::DB::OpenForReadOnly(DbOptions(), ckpt, descriptors, &handles, &db),
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
    meta_.assign(p, p + meta_text.size());
  }
  STRATA_RETURN_IF_ERROR(CloneCheckpointToLive(generation_));
  STRATA_RETURN_IF_ERROR(OpenDb(LiveDir(), /*create=*/false));
  // Leftovers of a crash during an earlier checkpoint.
  std::vector<std::string> children;
  STRATA_RETURN_IF_ERROR(FromRocks(env_->GetChildren(options_.dir, &children), options_.dir));
  for (const std::string& c : children) {
    if (c.rfind("ckpt-", 0) == 0 && c != "ckpt-" + std::to_string(generation_)) {
      STRATA_RETURN_IF_ERROR(RemoveDir(options_.dir + "/" + c));
    }
  }
  return Status::Ok();
}

Status RocksDbRowStore::MultiGet(TableId table, std::span<const Key> keys,
                                 std::span<std::byte> rows, std::span<uint8_t> found) {
  STRATA_ASSIGN_OR_RETURN(const Family* f, Find(table));
  const uint32_t rb = f->spec.row_bytes;
  if (rows.size() != keys.size() * rb || found.size() != keys.size()) {
    return Status::InvalidArgument("MultiGet table " + f->spec.name +
                                   ": rows/found spans do not match keys");
  }
  constexpr size_t kChunk = 1024;
  std::vector<char> key_bytes(kChunk * 8);
  std::vector<rocksdb::Slice> slices(kChunk);
  std::vector<rocksdb::PinnableSlice> values(kChunk);
  std::vector<rocksdb::Status> statuses(kChunk);
  for (size_t base = 0; base < keys.size(); base += kChunk) {
    const size_t n = std::min(kChunk, keys.size() - base);
    for (size_t i = 0; i < n; ++i) {
      EncodeKey(keys[base + i], &key_bytes[i * 8]);
      slices[i] = rocksdb::Slice(&key_bytes[i * 8], 8);
      values[i].Reset();
    }
    db_->MultiGet(rocksdb::ReadOptions(), f->handle, n, slices.data(), values.data(),
                  statuses.data());
    for (size_t i = 0; i < n; ++i) {
      const Key key = keys[base + i];
      if (statuses[i].IsNotFound()) {
        found[base + i] = 0;
        continue;
      }
      STRATA_RETURN_IF_ERROR(
          FromRocks(statuses[i], "MultiGet table " + f->spec.name + " key " + std::to_string(key)));
      if (values[i].size() != rb) {
        return Status::Corruption("table " + f->spec.name + " key " + std::to_string(key) +
                                  ": stored row has " + std::to_string(values[i].size()) +
                                  " bytes");
      }
      std::memcpy(rows.data() + (base + i) * rb, values[i].data(), rb);
      found[base + i] = 1;
    }
  }
  rows_read_ += keys.size();
  return Status::Ok();
}

Status RocksDbRowStore::MultiPut(TableId table, std::span<const Key> keys,
                                 std::span<const std::byte> rows) {
  STRATA_ASSIGN_OR_RETURN(const Family* f, Find(table));
  const uint32_t rb = f->spec.row_bytes;
  if (rows.size() != keys.size() * rb) {
    return Status::InvalidArgument("MultiPut table " + f->spec.name +
                                   ": rows span is not keys.size() * row_bytes");
  }
  std::shared_lock lock(write_mu_);
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;  // durability comes from checkpoints only
  constexpr size_t kChunk = 4096;
  for (size_t base = 0; base < keys.size(); base += kChunk) {
    const size_t n = std::min(kChunk, keys.size() - base);
    rocksdb::WriteBatch batch;
    for (size_t i = 0; i < n; ++i) {
      char k[8];
      EncodeKey(keys[base + i], k);
      const char* v = reinterpret_cast<const char*>(rows.data() + (base + i) * rb);
      STRATA_RETURN_IF_ERROR(FromRocks(batch.Put(f->handle, rocksdb::Slice(k, 8),
                                                 rocksdb::Slice(v, rb)),
                                       "MultiPut table " + f->spec.name));
    }
    STRATA_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "MultiPut table " + f->spec.name));
    rows_written_ += n;
    user_bytes_written_ += n * rb;
  }
  return Status::Ok();
}

Status RocksDbRowStore::Delete(TableId table, std::span<const Key> keys) {
  STRATA_ASSIGN_OR_RETURN(const Family* f, Find(table));
  std::shared_lock lock(write_mu_);
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  rocksdb::WriteBatch batch;
  for (Key key : keys) {
    char k[8];
    EncodeKey(key, k);
    STRATA_RETURN_IF_ERROR(FromRocks(batch.Delete(f->handle, rocksdb::Slice(k, 8)),
                                     "Delete table " + f->spec.name));
  }
  return FromRocks(db_->Write(wo, &batch), "Delete table " + f->spec.name);
}

Status RocksDbRowStore::Scan(TableId table,
                             const std::function<Status(Key, std::span<const std::byte>)>& fn) {
  STRATA_ASSIGN_OR_RETURN(const Family* f, Find(table));
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), f->handle));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (it->key().size() != 8 || it->value().size() != f->spec.row_bytes) {
      return Status::Corruption("Scan table " + f->spec.name + ": malformed entry");
    }
    const auto* v = reinterpret_cast<const std::byte*>(it->value().data());
    STRATA_RETURN_IF_ERROR(fn(DecodeKey(it->key().data()), {v, f->spec.row_bytes}));
  }
  return FromRocks(it->status(), "Scan table " + f->spec.name);
}

Status RocksDbRowStore::Sync() {
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  for (const Family& f : families_) handles.push_back(f.handle);
  return FromRocks(db_->Flush(rocksdb::FlushOptions(), handles), "Sync " + options_.dir);
}

Status RocksDbRowStore::Checkpoint(std::span<const std::byte> meta) {
  if (meta.size() > kCheckpointMetaBytesMax) {
    return Status::InvalidArgument("Checkpoint: meta larger than kCheckpointMetaBytesMax");
  }
  std::unique_lock lock(write_mu_);
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  const std::string where = "Checkpoint " + options_.dir;
  STRATA_RETURN_IF_ERROR(FromRocks(
      db_->Put(wo, meta_family_, kMetaKey,
               rocksdb::Slice(reinterpret_cast<const char*>(meta.data()), meta.size())),
      where));
  std::vector<rocksdb::ColumnFamilyHandle*> handles{meta_family_};
  for (const Family& f : families_) handles.push_back(f.handle);
  STRATA_RETURN_IF_ERROR(FromRocks(db_->Flush(rocksdb::FlushOptions(), handles), where));
  const uint64_t next = generation_ + 1;
  STRATA_RETURN_IF_ERROR(RemoveDir(CheckpointDir(next)));  // leftover of a failed attempt
  rocksdb::Checkpoint* raw = nullptr;
  STRATA_RETURN_IF_ERROR(FromRocks(rocksdb::Checkpoint::Create(db_.get(), &raw), where));
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  STRATA_RETURN_IF_ERROR(
      FromRocks(checkpoint->CreateCheckpoint(CheckpointDir(next), /*log_size_for_flush=*/0),
                where));
  STRATA_RETURN_IF_ERROR(WritePointer(next));
  const uint64_t old = generation_;
  generation_ = next;
  {
    std::lock_guard meta_lock(meta_mu_);
    meta_.assign(meta.begin(), meta.end());
  }
  if (old != 0) STRATA_RETURN_IF_ERROR(RemoveDir(CheckpointDir(old)));
  return Status::Ok();
}

RowStoreStats RocksDbRowStore::Stats() const {
  RowStoreStats s;
  s.rows_read = rows_read_.load();
  s.rows_written = rows_written_.load();
  s.user_bytes_written = user_bytes_written_.load();
  s.bytes_written = statistics_->getTickerCount(rocksdb::FLUSH_WRITE_BYTES) +
                    statistics_->getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
  // RocksDB counts no device reads of gets; data-block misses are device reads.
  s.bytes_read = statistics_->getTickerCount(rocksdb::COMPACT_READ_BYTES) +
                 statistics_->getTickerCount(rocksdb::BLOCK_CACHE_DATA_MISS) * 4096;
  for (const Family& f : families_) {
    uint64_t v = 0;
    if (db_->GetIntProperty(f.handle, "rocksdb.estimate-num-keys", &v)) {
      s.live_rows += v;
      s.live_bytes += v * f.spec.row_bytes;
    }
    if (db_->GetIntProperty(f.handle, "rocksdb.total-sst-files-size", &v)) s.file_bytes += v;
    if (db_->GetIntProperty(f.handle, "rocksdb.estimate-table-readers-mem", &v)) {
      s.index_bytes += v;
    }
  }
  return s;
}

}  // namespace

Result<std::unique_ptr<RowStore>> OpenRocksDbRowStore(const RowStoreOptions& options,
                                                      const std::vector<TableSpec>& tables) {
  auto store = std::make_unique<RocksDbRowStore>(options, tables);
  STRATA_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<RowStore>(std::move(store));
}

}  // namespace strata::storage
