// Trace files: recorded or synthetic embedding-access workloads, the input of
// `strata replay`, `strata trace opt` and the bench harness.
//
// A trace is a header (tables, worker count) followed by a stream of batch
// records, each naming a worker, its clock and, per table, the keys the batch
// touches (multi-hot: duplicates allowed), and one end record holding the
// totals. The format is versioned, little-endian, and every record carries an
// XXH64 checksum; docs/trace-format.md describes it byte by byte, and the
// constants below are its single source.
//
// TraceWriter and TraceReader stream: their memory is bounded by one record
// (kTraceRecordBytesMax) whatever the trace's size. A reader reports a corrupt
// or truncated file as Status::Corruption naming the file and byte offset; a
// file without its end record is never read as complete.
//
// Thread safety: a writer or reader is used by one thread at a time; several
// readers may read one file concurrently.
// Ownership: the caller owns the objects returned; batches passed to Append
// are only read during the call.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "strata/status.h"
#include "strata/types.h"

namespace strata::trace {

// ---- Format constants (docs/trace-format.md) --------------------------------
inline constexpr char kTraceMagic[8] = {'S', 'T', 'R', 'A', 'T', 'R', 'C', '\n'};
inline constexpr uint32_t kTraceVersion = 1;
inline constexpr uint32_t kRecordMagicBatch = 0x48435442;  // "BTCH" as bytes on disk
inline constexpr uint32_t kRecordMagicEnd = 0x21444E45;    // "END!" as bytes on disk
inline constexpr uint64_t kChecksumSeed = 0;               // XXH64 seed of every checksum
inline constexpr size_t kHeaderFixedBytes = 32;            // magic .. reserved
inline constexpr size_t kRecordPrefixBytes = 8;            // magic, payload_bytes
inline constexpr size_t kChecksumBytes = 8;
inline constexpr size_t kBatchPayloadFixedBytes = 16;  // worker, entries, clock
inline constexpr size_t kTableEntryFixedBytes = 8;     // table, key_count
inline constexpr size_t kEndPayloadBytes = 16;         // batch_count, key_count
// Limits: a reader rejects files beyond them before allocating.
inline constexpr uint32_t kTraceTablesMax = 4096;
inline constexpr uint32_t kTraceWorkersMax = 1 << 16;
// Bytes of a table name in the header (a u16 length field, capped): a
// format limit, above the Store's kTableNameBytesMax (strata/options.h).
inline constexpr size_t kTraceTableNameBytesMax = 255;
inline constexpr size_t kTraceHeaderBytesMax = 1 << 20;
inline constexpr size_t kTraceRecordBytesMax = size_t{256} << 20;

// ---- In-memory view ----------------------------------------------------------
struct TraceTable {
  std::string name;
  uint64_t key_space = 0;  // keys the table may hold (0: unknown)
};

struct TraceHeader {
  uint32_t version = kTraceVersion;
  uint32_t worker_count = 1;  // workers the batches name are < worker_count
  std::vector<TraceTable> tables;
};

struct TraceBatchTable {
  TableId table = 0;
  std::vector<Key> keys;  // in sample order; duplicates allowed (multi-hot)
};

// One mini-batch of one worker. `tables` lists tables in strictly increasing
// id order; a table the batch does not touch may be left out.
struct TraceBatch {
  WorkerId worker = 0;
  Clock clock = 0;
  std::vector<TraceBatchTable> tables;

  uint64_t KeyCount() const;
};

// Totals kept in the end record.
struct TraceTotals {
  uint64_t batches = 0;
  uint64_t keys = 0;
};

// Writes a trace to `path` through a temporary file renamed into place by
// Finish, so a failed or abandoned write leaves no partial trace at `path`.
class TraceWriter {
 public:
  // REQUIRES: header.tables non-empty, names at most kTraceTableNameBytesMax bytes.
  static Result<std::unique_ptr<TraceWriter>> Create(const std::string& path,
                                                     const TraceHeader& header);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Appends one batch. InvalidArgument (nothing written) when a table id is
  // unknown or not increasing, or the worker is >= header.worker_count.
  [[nodiscard]] Status Append(const TraceBatch& batch);
  // Writes the end record, syncs and renames the file into place.
  [[nodiscard]] Status Finish();

  const TraceTotals& totals() const { return totals_; }
  const TraceHeader& header() const { return header_; }

 private:
  TraceWriter(std::string path, TraceHeader header, std::FILE* file);
  [[nodiscard]] Status WriteRecord();  // patches payload_bytes, appends the checksum

  const std::string path_;
  const std::string tmp_path_;
  const TraceHeader header_;
  std::FILE* file_;
  std::vector<uint8_t> record_;  // reused per record
  TraceTotals totals_;
  bool finished_ = false;
};

// Reads a trace written by TraceWriter, one batch at a time.
class TraceReader {
 public:
  // Reads and checks the header. NotFound / IOError / Corruption.
  static Result<std::unique_ptr<TraceReader>> Open(const std::string& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // Reads the next batch into *batch (reusing its storage): true, or false
  // once the end record has been read and checked against the totals.
  // Corruption naming the byte offset on any damage, truncation included.
  Result<bool> Next(TraceBatch* batch);
  // Back to the first batch.
  [[nodiscard]] Status Rewind();

  const TraceHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // Byte offset of the next record.
  uint64_t offset() const { return offset_; }
  // Totals read so far (all of them once Next has returned false).
  const TraceTotals& totals() const { return totals_; }

 private:
  TraceReader(std::string path, std::FILE* file);
  [[nodiscard]] Status ReadHeader();
  // Corruption unless `len` bytes remain in the file after offset_.
  [[nodiscard]] Status CheckAvailable(size_t len, const char* what) const;
  [[nodiscard]] Status ReadExact(void* buf, size_t len, const char* what);
  Status Corrupt(uint64_t offset, const std::string& what) const;
  [[nodiscard]] Status DecodeBatch(uint64_t record_offset, TraceBatch* batch) const;

  const std::string path_;
  std::FILE* file_;
  TraceHeader header_;
  uint64_t data_offset_ = 0;  // first record
  uint64_t offset_ = 0;
  uint64_t file_bytes_ = 0;
  std::vector<uint8_t> record_;  // reused per record
  TraceTotals totals_;
  bool at_end_ = false;
};

// Reads a whole trace, calling fn(batch) for each batch; stops at the first
// error fn or the reader returns.
template <typename Fn>
Status ForEachBatch(const std::string& path, Fn&& fn) {
  STRATA_ASSIGN_OR_RETURN(auto reader, TraceReader::Open(path));
  TraceBatch batch;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, reader->Next(&batch));
    if (!more) return Status::Ok();
    STRATA_RETURN_IF_ERROR(fn(batch));
  }
}

}  // namespace strata::trace
