// TraceWriter and TraceReader: the on-disk trace format of
// include/strata/trace.h (docs/trace-format.md).
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "strata/trace.h"

namespace strata::trace {
namespace {

constexpr size_t kStdioBufferBytes = 1 << 20;

template <typename T>
T ToLittle(T v) {
  if constexpr (std::endian::native == std::endian::little) {
    return v;
  } else if constexpr (sizeof(T) == 2) {
    return __builtin_bswap16(v);
  } else if constexpr (sizeof(T) == 4) {
    return __builtin_bswap32(v);
  } else {
    return __builtin_bswap64(v);
  }
}

template <typename T>
void Put(std::vector<uint8_t>* out, T v) {
  v = ToLittle(v);
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out->insert(out->end(), p, p + sizeof(T));
}

template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return ToLittle(v);
}

uint64_t Checksum(const uint8_t* p, size_t len) { return XXH64(p, len, kChecksumSeed); }

std::string Hex(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t TraceBatch::KeyCount() const {
  uint64_t n = 0;
  for (const auto& t : tables) n += t.keys.size();
  return n;
}

// ---- Writer -------------------------------------------------------------------

TraceWriter::TraceWriter(std::string path, TraceHeader header, std::FILE* file)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), header_(std::move(header)), file_(file) {}

TraceWriter::~TraceWriter() {
  if (file_ != nullptr) std::fclose(file_);
  if (!finished_) ::unlink(tmp_path_.c_str());
}

Result<std::unique_ptr<TraceWriter>> TraceWriter::Create(const std::string& path,
                                                         const TraceHeader& header) {
  if (header.tables.empty() || header.tables.size() > kTraceTablesMax) {
    return Status::InvalidArgument("trace " + path + ": needs 1 to " +
                                   std::to_string(kTraceTablesMax) + " tables, got " +
                                   std::to_string(header.tables.size()));
  }
  if (header.worker_count == 0 || header.worker_count > kTraceWorkersMax) {
    return Status::InvalidArgument("trace " + path + ": worker_count " +
                                   std::to_string(header.worker_count) + " out of [1, " +
                                   std::to_string(kTraceWorkersMax) + "]");
  }
  std::vector<uint8_t> bytes(kTraceMagic, kTraceMagic + sizeof(kTraceMagic));
  Put<uint32_t>(&bytes, kTraceVersion);
  Put<uint32_t>(&bytes, 0);  // header_bytes, patched below
  Put<uint32_t>(&bytes, static_cast<uint32_t>(header.tables.size()));
  Put<uint32_t>(&bytes, header.worker_count);
  Put<uint64_t>(&bytes, 0);  // reserved
  for (const auto& t : header.tables) {
    if (t.name.empty() || t.name.size() > kTraceTableNameBytesMax) {
      return Status::InvalidArgument("trace " + path + ": table name '" + t.name +
                                     "' must have 1 to " + std::to_string(kTraceTableNameBytesMax) +
                                     " bytes");
    }
    Put<uint16_t>(&bytes, static_cast<uint16_t>(t.name.size()));
    bytes.insert(bytes.end(), t.name.begin(), t.name.end());
    Put<uint64_t>(&bytes, t.key_space);
  }
  const uint32_t header_bytes = static_cast<uint32_t>(bytes.size() + kChecksumBytes);
  if (header_bytes > kTraceHeaderBytesMax) {
    return Status::InvalidArgument("trace " + path + ": header too large");
  }
  const uint32_t le = ToLittle(header_bytes);
  std::memcpy(bytes.data() + 12, &le, sizeof(le));
  Put<uint64_t>(&bytes, Checksum(bytes.data(), bytes.size()));

  const std::string tmp = path + ".tmp";
  std::FILE* file = std::fopen(tmp.c_str(), "wb");
  if (file == nullptr) return Status::FromErrno(errno, "trace: create " + tmp);
  std::setvbuf(file, nullptr, _IOFBF, kStdioBufferBytes);
  std::unique_ptr<TraceWriter> writer(new TraceWriter(path, header, file));
  if (std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
    return Status::FromErrno(errno, "trace: write header of " + tmp);
  }
  return writer;
}

Status TraceWriter::Append(const TraceBatch& batch) {
  if (finished_) return Status::FailedPrecondition("trace " + path_ + ": Append after Finish");
  if (batch.worker >= header_.worker_count) {
    return Status::InvalidArgument("trace " + path_ + ": batch names worker " +
                                   std::to_string(batch.worker) + " but the header has " +
                                   std::to_string(header_.worker_count));
  }
  record_.clear();
  Put<uint32_t>(&record_, kRecordMagicBatch);
  Put<uint32_t>(&record_, 0);  // payload_bytes, patched below
  Put<uint32_t>(&record_, batch.worker);
  Put<uint32_t>(&record_, static_cast<uint32_t>(batch.tables.size()));
  Put<uint64_t>(&record_, static_cast<uint64_t>(batch.clock));
  int64_t previous = -1;
  for (const auto& t : batch.tables) {
    if (t.table >= header_.tables.size() || static_cast<int64_t>(t.table) <= previous) {
      return Status::InvalidArgument("trace " + path_ + ": batch table id " +
                                     std::to_string(t.table) +
                                     " unknown or not in increasing order");
    }
    previous = t.table;
    Put<uint32_t>(&record_, t.table);
    Put<uint32_t>(&record_, static_cast<uint32_t>(t.keys.size()));
    const size_t at = record_.size();
    record_.resize(at + t.keys.size() * sizeof(Key));
    if (t.keys.empty()) continue;  // an empty key list may have no storage at all
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(record_.data() + at, t.keys.data(), t.keys.size() * sizeof(Key));
    } else {
      for (size_t i = 0; i < t.keys.size(); ++i) {
        const Key k = ToLittle(t.keys[i]);
        std::memcpy(record_.data() + at + i * sizeof(Key), &k, sizeof(Key));
      }
    }
  }
  if (record_.size() - kRecordPrefixBytes > kTraceRecordBytesMax) {
    return Status::InvalidArgument("trace " + path_ + ": batch of " +
                                   std::to_string(batch.KeyCount()) + " keys exceeds " +
                                   std::to_string(kTraceRecordBytesMax) + " bytes");
  }
  STRATA_RETURN_IF_ERROR(WriteRecord());
  totals_.batches++;
  totals_.keys += batch.KeyCount();
  return Status::Ok();
}

Status TraceWriter::WriteRecord() {
  const uint32_t payload = ToLittle(static_cast<uint32_t>(record_.size() - kRecordPrefixBytes));
  std::memcpy(record_.data() + 4, &payload, sizeof(payload));
  Put<uint64_t>(&record_, Checksum(record_.data(), record_.size()));
  if (std::fwrite(record_.data(), 1, record_.size(), file_) != record_.size()) {
    return Status::FromErrno(errno, "trace: write " + tmp_path_);
  }
  return Status::Ok();
}

Status TraceWriter::Finish() {
  if (finished_) return Status::FailedPrecondition("trace " + path_ + ": Finish called twice");
  record_.clear();
  Put<uint32_t>(&record_, kRecordMagicEnd);
  Put<uint32_t>(&record_, 0);
  Put<uint64_t>(&record_, totals_.batches);
  Put<uint64_t>(&record_, totals_.keys);
  STRATA_RETURN_IF_ERROR(WriteRecord());
  if (std::fflush(file_) != 0) return Status::FromErrno(errno, "trace: flush " + tmp_path_);
  if (::fsync(::fileno(file_)) != 0) return Status::FromErrno(errno, "trace: sync " + tmp_path_);
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) return Status::FromErrno(errno, "trace: close " + tmp_path_);
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    return Status::FromErrno(errno, "trace: rename " + tmp_path_ + " to " + path_);
  }
  finished_ = true;
  return Status::Ok();
}

// ---- Reader -------------------------------------------------------------------

TraceReader::TraceReader(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}

TraceReader::~TraceReader() {
  if (file_ != nullptr) std::fclose(file_);
}

Result<std::unique_ptr<TraceReader>> TraceReader::Open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    if (errno == ENOENT) return Status::NotFound("trace " + path + ": no such file");
    return Status::FromErrno(errno, "trace: open " + path);
  }
  std::setvbuf(file, nullptr, _IOFBF, kStdioBufferBytes);
  std::unique_ptr<TraceReader> reader(new TraceReader(path, file));
  struct stat st;
  if (::fstat(::fileno(file), &st) != 0) return Status::FromErrno(errno, "trace: stat " + path);
  reader->file_bytes_ = static_cast<uint64_t>(st.st_size);
  STRATA_RETURN_IF_ERROR(reader->ReadHeader());
  return reader;
}

Status TraceReader::Corrupt(uint64_t offset, const std::string& what) const {
  return Status::Corruption("trace " + path_ + ": byte offset " + std::to_string(offset) + ": " +
                            what);
}

Status TraceReader::CheckAvailable(size_t len, const char* what) const {
  if (len > file_bytes_ - offset_) {
    return Corrupt(offset_, std::string("truncated: ") + what + " needs " + std::to_string(len) +
                                " bytes, the file ends after " +
                                std::to_string(file_bytes_ - offset_));
  }
  return Status::Ok();
}

Status TraceReader::ReadExact(void* buf, size_t len, const char* what) {
  STRATA_RETURN_IF_ERROR(CheckAvailable(len, what));
  if (std::fread(buf, 1, len, file_) != len) {
    return Status::FromErrno(errno,
                             "trace: read " + path_ + " at byte offset " + std::to_string(offset_));
  }
  offset_ += len;
  return Status::Ok();
}

Status TraceReader::ReadHeader() {
  uint8_t fixed[kHeaderFixedBytes];
  STRATA_RETURN_IF_ERROR(ReadExact(fixed, sizeof(fixed), "the file header"));
  if (std::memcmp(fixed, kTraceMagic, sizeof(kTraceMagic)) != 0) {
    return Corrupt(0, "not a strata trace (bad magic)");
  }
  header_.version = Get<uint32_t>(fixed + 8);
  if (header_.version != kTraceVersion) {
    return Corrupt(8, "unsupported trace version " + std::to_string(header_.version) +
                          " (this build reads version " + std::to_string(kTraceVersion) + ")");
  }
  const uint32_t header_bytes = Get<uint32_t>(fixed + 12);
  if (header_bytes < kHeaderFixedBytes + kChecksumBytes || header_bytes > kTraceHeaderBytesMax) {
    return Corrupt(12, "header size " + std::to_string(header_bytes) + " out of range");
  }
  const uint32_t table_count = Get<uint32_t>(fixed + 16);
  if (table_count == 0 || table_count > kTraceTablesMax) {
    return Corrupt(16, "table count " + std::to_string(table_count) + " out of range");
  }
  header_.worker_count = Get<uint32_t>(fixed + 20);
  if (header_.worker_count == 0 || header_.worker_count > kTraceWorkersMax) {
    return Corrupt(20, "worker count " + std::to_string(header_.worker_count) + " out of range");
  }
  // Lengths read from the file are checked against its size before any
  // buffer is sized by them.
  STRATA_RETURN_IF_ERROR(CheckAvailable(header_bytes - kHeaderFixedBytes, "the header"));
  std::vector<uint8_t> bytes(fixed, fixed + sizeof(fixed));
  bytes.resize(header_bytes);
  STRATA_RETURN_IF_ERROR(
      ReadExact(bytes.data() + kHeaderFixedBytes, header_bytes - kHeaderFixedBytes, "the header"));
  const size_t body_end = header_bytes - kChecksumBytes;
  if (Checksum(bytes.data(), body_end) != Get<uint64_t>(bytes.data() + body_end)) {
    return Corrupt(body_end, "header checksum mismatch");
  }
  size_t at = kHeaderFixedBytes;
  for (uint32_t i = 0; i < table_count; ++i) {
    if (at + 2 > body_end) return Corrupt(at, "header ends inside table " + std::to_string(i));
    const uint16_t name_bytes = Get<uint16_t>(bytes.data() + at);
    if (name_bytes == 0 || name_bytes > kTraceTableNameBytesMax ||
        at + 2 + name_bytes + 8 > body_end) {
      return Corrupt(
          at, "bad name length " + std::to_string(name_bytes) + " of table " + std::to_string(i));
    }
    TraceTable t;
    t.name.assign(reinterpret_cast<const char*>(bytes.data() + at + 2), name_bytes);
    t.key_space = Get<uint64_t>(bytes.data() + at + 2 + name_bytes);
    header_.tables.push_back(std::move(t));
    at += 2 + name_bytes + 8;
  }
  if (at != body_end) return Corrupt(at, "unexpected bytes after the table list");
  data_offset_ = offset_;
  return Status::Ok();
}

Status TraceReader::Rewind() {
  if (std::fseek(file_, static_cast<long>(data_offset_), SEEK_SET) != 0) {
    return Status::FromErrno(errno, "trace: seek " + path_);
  }
  offset_ = data_offset_;
  totals_ = TraceTotals{};
  at_end_ = false;
  return Status::Ok();
}

Result<bool> TraceReader::Next(TraceBatch* batch) {
  if (at_end_) return false;
  const uint64_t record_offset = offset_;
  if (offset_ == file_bytes_) {
    return Corrupt(offset_, "truncated: the file ends without its end record");
  }
  uint8_t prefix[kRecordPrefixBytes];
  STRATA_RETURN_IF_ERROR(ReadExact(prefix, sizeof(prefix), "a record header"));
  const uint32_t magic = Get<uint32_t>(prefix);
  const uint32_t payload_bytes = Get<uint32_t>(prefix + 4);
  if (magic != kRecordMagicBatch && magic != kRecordMagicEnd) {
    return Corrupt(record_offset, "bad record magic " + Hex(magic));
  }
  const size_t payload_min = magic == kRecordMagicEnd ? kEndPayloadBytes : kBatchPayloadFixedBytes;
  if (payload_bytes < payload_min || payload_bytes > kTraceRecordBytesMax ||
      (magic == kRecordMagicEnd && payload_bytes != kEndPayloadBytes)) {
    return Corrupt(record_offset + 4,
                   "record payload size " + std::to_string(payload_bytes) + " out of range");
  }
  STRATA_RETURN_IF_ERROR(CheckAvailable(payload_bytes + kChecksumBytes, "a record"));
  record_.resize(kRecordPrefixBytes + payload_bytes + kChecksumBytes);
  std::memcpy(record_.data(), prefix, sizeof(prefix));
  STRATA_RETURN_IF_ERROR(
      ReadExact(record_.data() + kRecordPrefixBytes, payload_bytes + kChecksumBytes, "a record"));
  const size_t sum_at = kRecordPrefixBytes + payload_bytes;
  if (Checksum(record_.data(), sum_at) != Get<uint64_t>(record_.data() + sum_at)) {
    return Corrupt(record_offset, "record checksum mismatch");
  }
  if (magic == kRecordMagicEnd) {
    const uint64_t batches = Get<uint64_t>(record_.data() + kRecordPrefixBytes);
    const uint64_t keys = Get<uint64_t>(record_.data() + kRecordPrefixBytes + 8);
    if (batches != totals_.batches || keys != totals_.keys) {
      return Corrupt(record_offset, "end record counts " + std::to_string(batches) + " batches, " +
                                        std::to_string(keys) + " keys; the file holds " +
                                        std::to_string(totals_.batches) + " batches, " +
                                        std::to_string(totals_.keys) + " keys");
    }
    if (offset_ != file_bytes_) return Corrupt(offset_, "data after the end record");
    at_end_ = true;
    return false;
  }
  STRATA_RETURN_IF_ERROR(DecodeBatch(record_offset, batch));
  totals_.batches++;
  totals_.keys += batch->KeyCount();
  return true;
}

Status TraceReader::DecodeBatch(uint64_t record_offset, TraceBatch* batch) const {
  const uint8_t* p = record_.data() + kRecordPrefixBytes;
  const size_t payload_bytes = record_.size() - kRecordPrefixBytes - kChecksumBytes;
  const uint64_t base = record_offset + kRecordPrefixBytes;
  batch->worker = Get<uint32_t>(p);
  if (batch->worker >= header_.worker_count) {
    return Corrupt(base, "worker " + std::to_string(batch->worker) + " >= worker count " +
                             std::to_string(header_.worker_count));
  }
  const uint32_t entries = Get<uint32_t>(p + 4);
  if (entries > header_.tables.size()) {
    return Corrupt(base + 4, "batch lists " + std::to_string(entries) + " tables");
  }
  batch->clock = static_cast<Clock>(Get<uint64_t>(p + 8));
  batch->tables.resize(entries);
  size_t at = kBatchPayloadFixedBytes;
  int64_t previous = -1;
  for (uint32_t e = 0; e < entries; ++e) {
    if (at + kTableEntryFixedBytes > payload_bytes) {
      return Corrupt(base + at, "batch ends inside table entry " + std::to_string(e));
    }
    const uint32_t table = Get<uint32_t>(p + at);
    const uint32_t key_count = Get<uint32_t>(p + at + 4);
    if (table >= header_.tables.size() || static_cast<int64_t>(table) <= previous) {
      return Corrupt(base + at,
                     "table id " + std::to_string(table) + " unknown or not in increasing order");
    }
    previous = table;
    at += kTableEntryFixedBytes;
    if (uint64_t{key_count} * sizeof(Key) > payload_bytes - at) {
      return Corrupt(base + at - 4,
                     "key count " + std::to_string(key_count) + " overruns the record");
    }
    auto& keys = batch->tables[e].keys;
    batch->tables[e].table = table;
    keys.resize(key_count);
    if (key_count > 0) std::memcpy(keys.data(), p + at, key_count * sizeof(Key));
    if constexpr (std::endian::native != std::endian::little) {
      for (auto& k : keys) k = ToLittle(k);
    }
    at += key_count * sizeof(Key);
  }
  if (at != payload_bytes) return Corrupt(base + at, "unexpected bytes after the last table");
  return Status::Ok();
}

}  // namespace strata::trace
