// RocksDB backend: the data path (MultiGet, MultiPut, Delete, Scan, Sync),
// stats and the factory. Open and checkpoints are in rocksdb_checkpoint.cc.
#include "storage/ssd/rocksdb_row_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "storage/ssd/rocksdb_store.h"

namespace strata::storage {
namespace rocks {

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

bool DirectIoWorks(const std::string& dir) {
  const std::string probe = dir + "/.direct_probe";
  const int fd = ::open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0644);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
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
  base::ReaderLock lock(&write_mu_);
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
      STRATA_RETURN_IF_ERROR(
          FromRocks(batch.Put(f->handle, rocksdb::Slice(k, 8), rocksdb::Slice(v, rb)),
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
  base::ReaderLock lock(&write_mu_);
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  rocksdb::WriteBatch batch;
  for (Key key : keys) {
    char k[8];
    EncodeKey(key, k);
    STRATA_RETURN_IF_ERROR(
        FromRocks(batch.Delete(f->handle, rocksdb::Slice(k, 8)), "Delete table " + f->spec.name));
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

RowStoreStats RocksDbRowStore::Stats() const {
  RowStoreStats s;
  s.rows_read = rows_read_.load();
  s.rows_written = rows_written_.load();
  s.user_bytes_written = user_bytes_written_.load();
  s.cleanup_errors = cleanup_errors_.load();
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

}  // namespace rocks

Result<std::unique_ptr<RowStore>> OpenRocksDbRowStore(const RowStoreOptions& options,
                                                      const std::vector<TableSpec>& tables) {
  auto store = std::make_unique<rocks::RocksDbRowStore>(options, tables);
  STRATA_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<RowStore>(std::move(store));
}

}  // namespace strata::storage
