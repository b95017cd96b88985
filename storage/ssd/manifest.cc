#include "storage/ssd/manifest.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstring>

#include "storage/ssd/limits.h"

namespace strata::storage {

static_assert(std::endian::native == std::endian::little, "format is little endian");

namespace {

constexpr uint64_t kChecksumBytes = 8;

template <typename T>
void Append(std::string* out, const T& value) {
  out->append(reinterpret_cast<const char*>(&value), sizeof(T));
}

Status Fail(const std::string& path, uint64_t offset, const std::string& what) {
  return Status::Corruption(path + " offset " + std::to_string(offset) + ": " + what);
}

// Bounds-checked reader over the manifest bytes before the checksum.
class Reader {
 public:
  Reader(const std::string& bytes, size_t end, const std::string& path)
      : bytes_(bytes), end_(end), path_(path) {}
  template <typename T>
  Status Get(T* value, const char* what) {
    return GetBytes(value, sizeof(T), what);
  }
  Status GetBytes(void* out, size_t len, const char* what) {
    if (len > remaining()) return Fail(path_, pos_, std::string("truncated ") + what);
    if (len > 0) std::memcpy(out, bytes_.data() + pos_, len);
    pos_ += len;
    return Status::Ok();
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return end_ - pos_; }

 private:
  const std::string& bytes_;
  const size_t end_;
  const std::string& path_;
  size_t pos_ = 0;
};

// What the header says, checked against the size of the file and the limits
// before anything is sized by it.
Status CheckHeader(const ssd::ManifestHeader& h, uint64_t file_bytes, const std::string& path,
                   uint32_t version) {
  if (h.magic != ssd::kManifestMagic) return Fail(path, 0, "bad magic");
  if (h.version != version) {
    return Fail(path, offsetof(ssd::ManifestHeader, version),
                "format version " + std::to_string(h.version) + " unsupported (this reader reads " +
                    std::to_string(version) + "; the store opens versions 1, 2 and 3)");
  }
  if (h.table_count > kTablesMax) {
    return Fail(
        path, offsetof(ssd::ManifestHeader, table_count),
        "table count " + std::to_string(h.table_count) + " above " + std::to_string(kTablesMax));
  }
  if (file_bytes < sizeof(h) + kChecksumBytes ||
      h.body_bytes != file_bytes - sizeof(h) - kChecksumBytes) {
    return Fail(path, offsetof(ssd::ManifestHeader, body_bytes),
                "body length " + std::to_string(h.body_bytes) + " does not match the file size " +
                    std::to_string(file_bytes));
  }
  if (file_bytes > kManifestBytesMax) {
    return Fail(path, offsetof(ssd::ManifestHeader, body_bytes), "larger than kManifestBytesMax");
  }
  if (h.meta_bytes > h.body_bytes || h.meta_bytes > kCheckpointMetaBytesMax) {
    return Fail(path, offsetof(ssd::ManifestHeader, meta_bytes),
                "meta length " + std::to_string(h.meta_bytes) +
                    " exceeds the body or kCheckpointMetaBytesMax");
  }
  return Status::Ok();
}

// A table record's fields, checked before its name and leaves are read.
Status CheckTableRecord(const ssd::TableRecord& r, uint64_t at, const std::string& path) {
  if (r.row_bytes == 0 || r.row_bytes > kRowBytesMax) {
    return Fail(path, at + offsetof(ssd::TableRecord, row_bytes),
                "row bytes " + std::to_string(r.row_bytes) + " outside [1, kRowBytesMax]");
  }
  if (r.page_bytes != ssd::PageBytes(r.row_bytes)) {
    return Fail(path, at + offsetof(ssd::TableRecord, page_bytes),
                "page bytes " + std::to_string(r.page_bytes) + ", rows of " +
                    std::to_string(r.row_bytes) + " bytes take " +
                    std::to_string(ssd::PageBytes(r.row_bytes)));
  }
  if (r.name_bytes > kRowStoreTableNameBytesMax) {
    return Fail(path, at + offsetof(ssd::TableRecord, name_bytes),
                "name length " + std::to_string(r.name_bytes) + " above " +
                    std::to_string(kRowStoreTableNameBytesMax));
  }
  if (r.leaf_count == 0 || r.leaf_count > kPagesPerFileMax) {
    return Fail(path, at + offsetof(ssd::TableRecord, leaf_count),
                "leaf count " + std::to_string(r.leaf_count) + " outside [1, kPagesPerFileMax]");
  }
  return Status::Ok();
}

// A table's leaves: ranges sorted from 0, row counts within a page's
// capacity and adding up to the table's, page numbers below
// kPagesPerFileMax and each referenced once (an empty leaf has no page).
Status CheckLeaves(const ManifestTable& t, uint64_t record_offset, const std::string& path) {
  const uint32_t capacity = ssd::PageCapacity(t.spec.row_bytes);
  uint64_t rows = 0;
  std::vector<uint64_t> pages;  // page << 32 | leaf index: sorted, duplicates are adjacent
  pages.reserve(t.leaves.size());
  for (size_t l = 0; l < t.leaves.size(); ++l) {
    const ssd::LeafRecord& leaf = t.leaves[l];
    const uint64_t at = t.leaves_offset + l * sizeof(ssd::LeafRecord);
    if (l == 0 && leaf.low_mixed != 0) return Fail(path, at, "first leaf does not start at 0");
    if (l > 0 && leaf.low_mixed <= t.leaves[l - 1].low_mixed) {
      return Fail(path, at, "leaves unsorted");
    }
    if (leaf.page == ssd::kNoPage) {
      if (leaf.row_count != 0) {
        return Fail(path, at + offsetof(ssd::LeafRecord, row_count),
                    "leaf without a page holds rows");
      }
      continue;
    }
    if (leaf.page >= kPagesPerFileMax) {
      return Fail(path, at + offsetof(ssd::LeafRecord, page),
                  "page number " + std::to_string(leaf.page) + " above kPagesPerFileMax");
    }
    if (leaf.row_count == 0 || leaf.row_count > capacity) {
      return Fail(path, at + offsetof(ssd::LeafRecord, row_count),
                  "leaf row count " + std::to_string(leaf.row_count) + " outside [1, " +
                      std::to_string(capacity) + "]");
    }
    rows += leaf.row_count;
    pages.push_back(uint64_t{leaf.page} << 32 | l);
  }
  if (rows != t.row_count) {
    return Fail(path, record_offset + offsetof(ssd::TableRecord, row_count),
                "table " + t.spec.name + " row count " + std::to_string(t.row_count) +
                    ", its leaves hold " + std::to_string(rows));
  }
  std::sort(pages.begin(), pages.end());
  for (size_t i = 1; i < pages.size(); ++i) {
    if (pages[i] >> 32 == pages[i - 1] >> 32) {
      const uint64_t leaf = pages[i] & 0xFFFFFFFFu;
      return Fail(
          path, t.leaves_offset + leaf * sizeof(ssd::LeafRecord) + offsetof(ssd::LeafRecord, page),
          "table " + t.spec.name + " page " + std::to_string(pages[i] >> 32) + " referenced twice");
    }
  }
  return Status::Ok();
}

// Header, body, checksum.
std::string Frame(uint32_t version, uint64_t generation, size_t table_count, size_t meta_bytes,
                  const std::string& body) {
  ssd::ManifestHeader h{};
  h.magic = ssd::kManifestMagic;
  h.version = version;
  h.table_count = static_cast<uint32_t>(table_count);
  h.generation = generation;
  h.meta_bytes = meta_bytes;
  h.body_bytes = body.size();
  std::string out;
  out.reserve(sizeof(h) + body.size() + 8);
  Append(&out, h);
  out += body;
  Append(&out, XXH3_64bits(out.data(), out.size()));
  return out;
}

// Checks the header and the checksum of `bytes`, returns the header.
Result<ssd::ManifestHeader> CheckFrame(const std::string& bytes, const std::string& path,
                                       uint32_t version) {
  ssd::ManifestHeader h;
  if (bytes.size() < sizeof(h)) return Fail(path, 0, "truncated header");
  std::memcpy(&h, bytes.data(), sizeof(h));
  STRATA_RETURN_IF_ERROR(CheckHeader(h, bytes.size(), path, version));
  const size_t sum_at = bytes.size() - kChecksumBytes;
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + sum_at, kChecksumBytes);
  if (XXH3_64bits(bytes.data(), sum_at) != stored) {
    return Fail(path, sum_at, "manifest checksum mismatch");
  }
  return h;
}

}  // namespace

std::string EncodeManifest(const Manifest& m) {
  std::string body;
  body.append(reinterpret_cast<const char*>(m.meta.data()), m.meta.size());
  for (const ManifestTable& t : m.tables) {
    ssd::TableRecord r{};
    r.table_id = t.spec.id;
    r.row_bytes = t.spec.row_bytes;
    r.page_bytes = t.page_bytes;
    r.name_bytes = static_cast<uint32_t>(t.spec.name.size());
    r.file_number = t.file_number;
    r.row_count = t.row_count;
    r.leaf_count = t.leaves.size();
    Append(&body, r);
    body += t.spec.name;
    body.append(reinterpret_cast<const char*>(t.leaves.data()),
                t.leaves.size() * sizeof(ssd::LeafRecord));
  }
  return Frame(ssd::kFormatVersion, m.generation, m.tables.size(), m.meta.size(), body);
}

Result<Manifest> DecodeManifest(const std::string& bytes, const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(ssd::ManifestHeader h, CheckFrame(bytes, path, ssd::kFormatVersion));
  const size_t sum_at = bytes.size() - kChecksumBytes;
  // Every length below is checked against the bytes left before anything is
  // sized by it.
  Reader in(bytes, sum_at, path);
  STRATA_RETURN_IF_ERROR(in.Get(&h, "header"));
  Manifest m;
  m.generation = h.generation;
  m.meta.resize(h.meta_bytes);  // CheckHeader: at most body_bytes
  STRATA_RETURN_IF_ERROR(in.GetBytes(m.meta.data(), m.meta.size(), "meta"));
  for (uint32_t i = 0; i < h.table_count; ++i) {
    const uint64_t at = in.pos();
    ssd::TableRecord r;
    STRATA_RETURN_IF_ERROR(in.Get(&r, "table record"));
    STRATA_RETURN_IF_ERROR(CheckTableRecord(r, at, path));
    for (const ManifestTable& other : m.tables) {
      if (other.spec.id == r.table_id) {
        return Fail(path, at, "table id " + std::to_string(r.table_id) + " appears twice");
      }
    }
    ManifestTable t;
    t.spec.id = r.table_id;
    t.spec.row_bytes = r.row_bytes;
    t.spec.name.resize(r.name_bytes);  // CheckTableRecord: at most kRowStoreTableNameBytesMax
    STRATA_RETURN_IF_ERROR(in.GetBytes(t.spec.name.data(), r.name_bytes, "table name"));
    t.page_bytes = r.page_bytes;
    t.file_number = r.file_number;
    t.row_count = r.row_count;
    t.leaves_offset = in.pos();
    if (r.leaf_count > in.remaining() / sizeof(ssd::LeafRecord)) {
      return Fail(path, at + offsetof(ssd::TableRecord, leaf_count),
                  "leaf count " + std::to_string(r.leaf_count) + " overruns the body");
    }
    t.leaves.resize(r.leaf_count);
    STRATA_RETURN_IF_ERROR(
        in.GetBytes(t.leaves.data(), r.leaf_count * sizeof(ssd::LeafRecord), "leaves"));
    STRATA_RETURN_IF_ERROR(CheckLeaves(t, at, path));
    m.tables.push_back(std::move(t));
  }
  if (in.remaining() != 0) return Fail(path, in.pos(), "trailing bytes");
  return m;
}

Status CheckManifestPages(const ManifestTable& table, uint64_t file_pages,
                          const std::string& path) {
  for (size_t l = 0; l < table.leaves.size(); ++l) {
    const uint32_t page = table.leaves[l].page;
    if (page != ssd::kNoPage && page >= file_pages) {
      return Fail(
          path, table.leaves_offset + l * sizeof(ssd::LeafRecord) + offsetof(ssd::LeafRecord, page),
          "table " + table.spec.name + " page " + std::to_string(page) +
              " lies beyond its data file of " + std::to_string(file_pages) + " pages");
    }
  }
  return Status::Ok();
}

Status WriteManifest(io::Env* env, const std::string& dir, const Manifest& manifest,
                     uint64_t* bytes_written, bool* in_doubt) {
  const std::string bytes = EncodeManifest(manifest);
  STRATA_RETURN_IF_ERROR(
      env->WriteFileAtomically(dir, ssd::kManifestName, ssd::kManifestTmpName, bytes, in_doubt));
  *bytes_written = bytes.size();
  return Status::Ok();
}

// The bytes of dir/MANIFEST after its header checked out against the file
// size (nothing is read whole or sized by the file before), or nullopt when
// there is none.
Result<std::optional<std::string>> ReadManifestBytes(io::Env* env, const std::string& dir,
                                                     uint32_t version) {
  const std::string path = dir + "/" + ssd::kManifestName;
  if (!env->FileExists(path)) return std::optional<std::string>();
  io::FileOptions options;
  options.read_only = true;
  STRATA_ASSIGN_OR_RETURN(auto file, env->OpenFile(path, options));
  STRATA_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  ssd::ManifestHeader h;
  if (size < sizeof(h)) return Fail(path, 0, "truncated header");
  size_t got = 0;
  STRATA_RETURN_IF_ERROR(file->Read(0, sizeof(h), &h, &got));
  if (got != sizeof(h)) return Fail(path, got, "short read");
  STRATA_RETURN_IF_ERROR(CheckHeader(h, size, path, version));
  std::string bytes(size, '\0');
  STRATA_RETURN_IF_ERROR(file->Read(0, size, bytes.data(), &got));
  if (got != size) return Fail(path, got, "short read");
  return std::optional<std::string>(std::move(bytes));
}

Result<std::optional<Manifest>> ReadManifest(io::Env* env, const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                          ReadManifestBytes(env, dir, ssd::kFormatVersion));
  if (!bytes) return std::optional<Manifest>();
  STRATA_ASSIGN_OR_RETURN(Manifest m, DecodeManifest(*bytes, dir + "/" + ssd::kManifestName));
  return std::optional<Manifest>(std::move(m));
}

Result<std::optional<uint32_t>> ReadManifestVersion(io::Env* env, const std::string& dir) {
  const std::string path = dir + "/" + ssd::kManifestName;
  if (!env->FileExists(path)) return std::optional<uint32_t>();
  io::FileOptions options;
  options.read_only = true;
  STRATA_ASSIGN_OR_RETURN(auto file, env->OpenFile(path, options));
  ssd::ManifestHeader h;
  size_t got = 0;
  STRATA_RETURN_IF_ERROR(file->Read(0, sizeof(h), &h, &got));
  if (got != sizeof(h)) return Fail(path, got, "truncated header");
  if (h.magic != ssd::kManifestMagic) return Fail(path, 0, "bad magic");
  if (h.version != ssd::kFormatVersion && h.version != ssd::kFormatVersion2 &&
      h.version != ssd::kFormatVersion3) {
    return Fail(path, offsetof(ssd::ManifestHeader, version),
                "format version " + std::to_string(h.version) +
                    " unsupported (this build reads 1, 2 and 3)");
  }
  return std::optional<uint32_t>(h.version);
}

// Version 2.

bool ValidSegmentBytes(uint64_t segment_bytes, uint32_t row_bytes) {
  return segment_bytes >= kSegmentBytesMin && segment_bytes <= kSegmentBytesMax &&
         std::has_single_bit(segment_bytes) && SegmentCapacity(segment_bytes, row_bytes) >= 1;
}

namespace {

Status CheckTableRecordV2(const ssd::TableRecordV2& r, uint64_t at, const std::string& path) {
  if (r.row_bytes == 0 || r.row_bytes > kRowBytesMax) {
    return Fail(path, at + offsetof(ssd::TableRecordV2, row_bytes),
                "row bytes " + std::to_string(r.row_bytes) + " outside [1, kRowBytesMax]");
  }
  if (!ValidSegmentBytes(r.segment_bytes, r.row_bytes)) {
    return Fail(path, at + offsetof(ssd::TableRecordV2, segment_bytes),
                "segment bytes " + std::to_string(r.segment_bytes) +
                    " not a power of two in [kSegmentBytesMin, kSegmentBytesMax] holding a record");
  }
  if (r.name_bytes > kRowStoreTableNameBytesMax) {
    return Fail(path, at + offsetof(ssd::TableRecordV2, name_bytes),
                "name length " + std::to_string(r.name_bytes) + " above " +
                    std::to_string(kRowStoreTableNameBytesMax));
  }
  if (r.segment_count > kLogSlotsMax) {
    return Fail(path, at + offsetof(ssd::TableRecordV2, segment_count),
                "segment count " + std::to_string(r.segment_count) + " above kLogSlotsMax");
  }
  if (r.next_seq > ssd::kRecordSeqMax + 1) {
    return Fail(path, at + offsetof(ssd::TableRecordV2, next_seq), "next seq above 2^48");
  }
  return Status::Ok();
}

// Slots below kLogSlotsMax and unique, extents within a segment's
// capacity, segment seqs unique and below next_segment_seq.
Status CheckSegments(const ManifestTableV2& t, const std::string& path) {
  const uint64_t capacity = SegmentCapacity(t.segment_bytes, t.spec.row_bytes);
  std::vector<uint64_t> slots, seqs;
  for (size_t i = 0; i < t.segments.size(); ++i) {
    const ssd::SegmentRecord& s = t.segments[i];
    const uint64_t at = t.segments_offset + i * sizeof(ssd::SegmentRecord);
    if (s.slot >= kLogSlotsMax || uint64_t{s.slot} * capacity + capacity - 1 > kLogAddressMax) {
      return Fail(path, at + offsetof(ssd::SegmentRecord, slot),
                  "slot " + std::to_string(s.slot) + " above the address space");
    }
    if (s.record_count == 0 || s.record_count > capacity) {
      return Fail(path, at + offsetof(ssd::SegmentRecord, record_count),
                  "record count " + std::to_string(s.record_count) + " outside [1, " +
                      std::to_string(capacity) + "]");
    }
    if (s.segment_seq >= t.next_segment_seq) {
      return Fail(path, at + offsetof(ssd::SegmentRecord, segment_seq),
                  "segment seq " + std::to_string(s.segment_seq) + " not below next_segment_seq");
    }
    slots.push_back(uint64_t{s.slot} << 32 | i);
    seqs.push_back(s.segment_seq);
  }
  std::sort(slots.begin(), slots.end());
  for (size_t i = 1; i < slots.size(); ++i) {
    if (slots[i] >> 32 == slots[i - 1] >> 32) {
      return Fail(
          path, t.segments_offset + (slots[i] & 0xFFFFFFFFu) * sizeof(ssd::SegmentRecord),
          "table " + t.spec.name + " slot " + std::to_string(slots[i] >> 32) + " named twice");
    }
  }
  std::sort(seqs.begin(), seqs.end());
  if (std::adjacent_find(seqs.begin(), seqs.end()) != seqs.end()) {
    return Fail(path, t.segments_offset, "table " + t.spec.name + " segment seq named twice");
  }
  return Status::Ok();
}

}  // namespace

std::string EncodeManifestV2(const ManifestV2& m) {
  std::string body;
  body.append(reinterpret_cast<const char*>(m.meta.data()), m.meta.size());
  for (const ManifestTableV2& t : m.tables) {
    ssd::TableRecordV2 r{};
    r.table_id = t.spec.id;
    r.row_bytes = t.spec.row_bytes;
    r.segment_bytes = t.segment_bytes;
    r.name_bytes = static_cast<uint32_t>(t.spec.name.size());
    r.file_number = t.file_number;
    r.row_count = t.row_count;
    r.next_seq = t.next_seq;
    r.next_segment_seq = t.next_segment_seq;
    r.segment_count = t.segments.size();
    Append(&body, r);
    body += t.spec.name;
    body.append(reinterpret_cast<const char*>(t.segments.data()),
                t.segments.size() * sizeof(ssd::SegmentRecord));
  }
  return Frame(m.ranges ? ssd::kFormatVersion3 : ssd::kFormatVersion2, m.generation,
               m.tables.size(), m.meta.size(), body);
}

// The version a version-2 body's frame says: 3 with key ranges, else 2.
uint32_t FrameVersionV2(const std::string& bytes) {
  ssd::ManifestHeader h;
  if (bytes.size() < sizeof(h)) return ssd::kFormatVersion2;
  std::memcpy(&h, bytes.data(), sizeof(h));
  return h.version == ssd::kFormatVersion3 ? ssd::kFormatVersion3 : ssd::kFormatVersion2;
}

Result<ManifestV2> DecodeManifestV2(const std::string& bytes, const std::string& path) {
  const uint32_t version = FrameVersionV2(bytes);
  STRATA_ASSIGN_OR_RETURN(ssd::ManifestHeader h, CheckFrame(bytes, path, version));
  Reader in(bytes, bytes.size() - kChecksumBytes, path);
  STRATA_RETURN_IF_ERROR(in.Get(&h, "header"));
  ManifestV2 m;
  m.generation = h.generation;
  m.ranges = version == ssd::kFormatVersion3;
  m.meta.resize(h.meta_bytes);  // CheckHeader: at most body_bytes
  STRATA_RETURN_IF_ERROR(in.GetBytes(m.meta.data(), m.meta.size(), "meta"));
  for (uint32_t i = 0; i < h.table_count; ++i) {
    const uint64_t at = in.pos();
    ssd::TableRecordV2 r;
    STRATA_RETURN_IF_ERROR(in.Get(&r, "table record"));
    STRATA_RETURN_IF_ERROR(CheckTableRecordV2(r, at, path));
    for (const ManifestTableV2& other : m.tables) {
      if (other.spec.id == r.table_id) {
        return Fail(path, at, "table id " + std::to_string(r.table_id) + " appears twice");
      }
    }
    ManifestTableV2 t;
    t.spec.id = r.table_id;
    t.spec.row_bytes = r.row_bytes;
    t.spec.name.resize(r.name_bytes);
    STRATA_RETURN_IF_ERROR(in.GetBytes(t.spec.name.data(), r.name_bytes, "table name"));
    t.segment_bytes = r.segment_bytes;
    t.file_number = r.file_number;
    t.row_count = r.row_count;
    t.next_seq = r.next_seq;
    t.next_segment_seq = r.next_segment_seq;
    t.segments_offset = in.pos();
    if (r.segment_count > in.remaining() / sizeof(ssd::SegmentRecord)) {
      return Fail(path, at + offsetof(ssd::TableRecordV2, segment_count),
                  "segment count " + std::to_string(r.segment_count) + " overruns the body");
    }
    t.segments.resize(r.segment_count);
    STRATA_RETURN_IF_ERROR(
        in.GetBytes(t.segments.data(), r.segment_count * sizeof(ssd::SegmentRecord), "segments"));
    STRATA_RETURN_IF_ERROR(CheckSegments(t, path));
    m.tables.push_back(std::move(t));
  }
  if (in.remaining() != 0) return Fail(path, in.pos(), "trailing bytes");
  return m;
}

Status WriteManifestV2(io::Env* env, const std::string& dir, const ManifestV2& manifest,
                       uint64_t* bytes_written, bool* in_doubt) {
  const std::string bytes = EncodeManifestV2(manifest);
  STRATA_RETURN_IF_ERROR(
      env->WriteFileAtomically(dir, ssd::kManifestName, ssd::kManifestTmpName, bytes, in_doubt));
  *bytes_written = bytes.size();
  return Status::Ok();
}

Result<std::optional<ManifestV2>> ReadManifestV2(io::Env* env, const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(std::optional<uint32_t> version, ReadManifestVersion(env, dir));
  const uint32_t v2 = version == ssd::kFormatVersion3 ? ssd::kFormatVersion3 : ssd::kFormatVersion2;
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> bytes, ReadManifestBytes(env, dir, v2));
  if (!bytes) return std::optional<ManifestV2>();
  STRATA_ASSIGN_OR_RETURN(ManifestV2 m, DecodeManifestV2(*bytes, dir + "/" + ssd::kManifestName));
  return std::optional<ManifestV2>(std::move(m));
}

}  // namespace strata::storage
