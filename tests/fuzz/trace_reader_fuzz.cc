// Fuzz target: the trace reader (trace/format.cc, docs/trace-format.md).
//
// The input is a trace file. It is read twice: as it is, and with every
// checksum the header and record lengths locate recomputed, so that mutations
// get past the checksums to the checks behind them. Properties:
// - reading never crashes, and allocates no more than the file's size allows
//   (libFuzzer's -malloc_limit_mb catches a length trusted before the check);
// - a failure is a Corruption naming the file and a byte offset;
// - a trace read to its end record, written again by TraceWriter, gives the
//   same records byte for byte (the format has one encoding of each batch).
#include <xxhash.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/assert.h"
#include "strata/trace.h"
#include "tests/fuzz/fuzz_util.h"

namespace strata::fuzz {
namespace {

constexpr uint64_t kBatchesMax = 1 << 16;  // a record has at least 24 bytes

uint32_t GetU32(const std::string& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}

void PutSum(std::string* b, size_t begin, size_t end) {
  const uint64_t sum = XXH64(b->data() + begin, end - begin, trace::kChecksumSeed);
  std::memcpy(b->data() + end, &sum, 8);
}

// Recomputes the header and record checksums where the lengths put them
// inside the file.
void RepairChecksums(std::string* b) {
  if (b->size() < trace::kHeaderFixedBytes) return;
  const uint64_t header_bytes = GetU32(*b, 12);
  if (header_bytes < trace::kHeaderFixedBytes + 8 || header_bytes > b->size()) return;
  PutSum(b, 0, header_bytes - 8);
  uint64_t at = header_bytes;
  while (at + trace::kRecordPrefixBytes <= b->size()) {
    const uint64_t end = at + trace::kRecordPrefixBytes + GetU32(*b, at + 4);
    if (end + 8 > b->size()) return;
    PutSum(b, at, end);
    at = end + 8;
  }
}

// Reads the whole trace at `path`: OK with its header and batches, or the error.
Status ReadAll(const std::string& path, trace::TraceHeader* header,
               std::vector<trace::TraceBatch>* batches) {
  STRATA_ASSIGN_OR_RETURN(auto reader, trace::TraceReader::Open(path));
  *header = reader->header();
  trace::TraceBatch batch;
  for (uint64_t n = 0;; ++n) {
    STRATA_ASSERT(n <= kBatchesMax, "fuzz: more batches than the file can hold");
    STRATA_ASSIGN_OR_RETURN(bool more, reader->Next(&batch));
    if (!more) break;
    batches->push_back(batch);
  }
  STRATA_ASSERT(reader->totals().batches == batches->size(), "fuzz: totals disagree");
  return Status::Ok();
}

void Check(const std::string& bytes) {
  const std::string path = ScratchPath("in.trace");
  WriteFile(path, bytes.data(), bytes.size());
  trace::TraceHeader header;
  std::vector<trace::TraceBatch> batches;
  const Status s = ReadAll(path, &header, &batches);
  if (!s.ok()) {
    CheckError(s, StatusCode::kCorruption, {path, "byte offset "});
    return;
  }
  // Write it again: the records must come out as they went in.
  const std::string copy = ScratchPath("copy.trace");
  auto writer = trace::TraceWriter::Create(copy, header);
  STRATA_ASSERT(writer.ok(), "fuzz: a header the reader accepts is refused by the writer");
  for (const trace::TraceBatch& b : batches) {
    STRATA_ASSERT((*writer)->Append(b).ok(), "fuzz: a batch the reader accepts is refused");
  }
  STRATA_ASSERT((*writer)->Finish().ok(), "fuzz: Finish failed");
  const std::string again = ReadFile(copy);
  STRATA_ASSERT(again.size() == bytes.size(), "fuzz: the rewritten trace differs in size");
  const size_t header_bytes = GetU32(bytes, 12);
  STRATA_ASSERT(again.compare(header_bytes, std::string::npos, bytes, header_bytes) == 0,
                "fuzz: the rewritten records differ");
}

}  // namespace
}  // namespace strata::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  strata::fuzz::Check(bytes);
  std::string repaired = bytes;
  strata::fuzz::RepairChecksums(&repaired);
  if (repaired != bytes) strata::fuzz::Check(repaired);
  return 0;
}
