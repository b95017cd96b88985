// On-disk format of the native SSD row store, version 1: every constant and
// layout struct in one place. The format is described in docs/ssd-format.md;
// change both together and bump kFormatVersion on any incompatible change.
//
// Summary: each table is a sequence of leaf pages ordered by MixKey(key), a
// bijection on 64-bit keys, so every key has exactly one home range and keys
// 0 and 2^64-1 need no special case. A DRAM directory maps each leaf's first
// mixed key to its physical page (16 bytes per leaf, no per-key entry).
// Pages are copy-on-write: a changed leaf is written to a free page, never
// over a page that the durable MANIFEST references, so a crash at any point
// leaves the last checkpoint intact. The MANIFEST (tables, directories,
// checkpoint meta) is replaced atomically: write MANIFEST.tmp, fsync, rename,
// fsync the directory.
//
// Thread safety: constants and pure functions only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/hash.h"
#include "strata/types.h"

namespace strata::storage::ssd {

inline constexpr uint16_t kFormatVersion = 1;

// Device alignment of every page, offset and buffer (O_DIRECT).
inline constexpr uint32_t kAlignBytes = 4096;

// Leaf page: a 32-byte header, then `capacity` keys (8 bytes each, little
// endian), then `capacity` rows of row_bytes. Only the first `row_count`
// slots are used.
inline constexpr uint32_t kPageMagic = 0x50525453;  // "STRP"
inline constexpr uint32_t kPageHeaderBytes = 32;
// A page holds at least this many rows (pages grow in 4 KiB steps until it
// does): bounds the directory at 16 / (4 * 0.5) = 8 bytes per key even for
// half-full leaves of huge rows.
inline constexpr uint32_t kRowsPerPageMin = 4;

struct PageHeader {
  uint64_t checksum;   // XXH3-64 of bytes [8, page_bytes) of the page
  uint32_t magic;      // kPageMagic
  uint16_t version;    // kFormatVersion
  uint16_t row_count;  // used slots
  uint32_t table_id;
  uint32_t reserved;   // zero
  uint64_t low_mixed;  // first MixKey value of the leaf's range
};
static_assert(sizeof(PageHeader) == kPageHeaderBytes);

// Physical page number meaning "leaf is empty, no page on disk".
inline constexpr uint32_t kNoPage = 0xFFFFFFFFu;

// MANIFEST file: ManifestHeader, then the body, then an 8-byte XXH3-64 of
// header and body. Body: meta bytes, then per table: TableRecord, name
// bytes, then leaf_count LeafRecords.
inline constexpr uint64_t kManifestMagic = 0x314D465441525453ull;  // "STRATFM1"
inline constexpr char kManifestName[] = "MANIFEST";
inline constexpr char kManifestTmpName[] = "MANIFEST.tmp";

struct ManifestHeader {
  uint64_t magic;    // kManifestMagic
  uint32_t version;  // kFormatVersion
  uint32_t table_count;
  uint64_t generation;  // checkpoint number, 1 for the first
  uint64_t meta_bytes;  // length of the opaque checkpoint meta
  uint64_t body_bytes;  // bytes between this header and the trailing checksum
};

struct TableRecord {
  uint32_t table_id;
  uint32_t row_bytes;
  uint32_t page_bytes;
  uint32_t name_bytes;
  uint64_t file_number;  // data file "t<table_id>-<file_number>.pages"
  uint64_t row_count;
  uint64_t leaf_count;
};

struct LeafRecord {
  uint64_t low_mixed;
  uint32_t page;  // physical page number, or kNoPage
  uint32_t row_count;
};
static_assert(sizeof(LeafRecord) == 16);

// Leaves are split when a write would overfill them; garbage collection
// repacks a table's leaves to this fill when its space amplification passes
// the store's trigger.
inline constexpr double kGcFillTarget = 0.9;

// Write log (docs/ssd-format.md, "Write log"): per table a scratch file
// "t<table_id>.log" of records appended by MultiPut and merged into the
// leaves before every checkpoint. No MANIFEST names it: Open truncates it, so
// it never changes what a checkpoint holds. A record is a 24-byte header and
// the row; records never straddle a unit (4 KiB, or the 4 KiB blocks one
// large record needs), so a get reads one unit.
struct LogRecordHeader {
  uint64_t checksum;  // XXH3-64 of bytes [8, 24 + row_bytes), seeded by LogSeed
  uint64_t key;
  uint32_t kind;  // kLogRecordRow
  uint32_t table_id;
};
inline constexpr uint32_t kLogRecordHeaderBytes = 24;
static_assert(sizeof(LogRecordHeader) == kLogRecordHeaderBytes);
inline constexpr uint32_t kLogRecordRow = 1;

struct LogLayout {
  uint32_t record_bytes = 0;      // header + row, rounded up to 8
  uint32_t records_per_unit = 0;  // records in one unit
  uint32_t unit_bytes = 0;        // a multiple of kAlignBytes
};

constexpr LogLayout MakeLogLayout(uint32_t row_bytes) {
  LogLayout l;
  l.record_bytes = (kLogRecordHeaderBytes + row_bytes + 7) / 8 * 8;
  if (l.record_bytes <= kAlignBytes) {
    l.records_per_unit = kAlignBytes / l.record_bytes;
    l.unit_bytes = kAlignBytes;
  } else {
    l.records_per_unit = 1;
    l.unit_bytes = (l.record_bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  }
  return l;
}

// A table has two logs (one taking puts while the other is merged):
// "t<table_id>.log" (0) and "t<table_id>.1.log" (1).
inline std::string LogFileName(TableId table, int which = 0) {
  return "t" + std::to_string(table) + (which == 0 ? "" : "." + std::to_string(which)) + ".log";
}

// Bijective mix of a key (splitmix64 finalizer): distinct keys never collide,
// and the image is uniform enough for range partitioning by value.
constexpr uint64_t MixKey(Key key) { return MixSplit64(key); }

// Bytes of a leaf page of a table whose rows are `row_bytes`.
constexpr uint32_t PageBytes(uint32_t row_bytes) {
  const uint64_t need = kPageHeaderBytes + uint64_t{kRowsPerPageMin} * (8 + row_bytes);
  return static_cast<uint32_t>((need + kAlignBytes - 1) / kAlignBytes * kAlignBytes);
}

// Rows a leaf page holds.
constexpr uint32_t PageCapacity(uint32_t row_bytes) {
  return (PageBytes(row_bytes) - kPageHeaderBytes) / (8 + row_bytes);
}

inline std::string DataFileName(TableId table, uint64_t file_number) {
  return "t" + std::to_string(table) + "-" + std::to_string(file_number) + ".pages";
}

// True for names "t<digits>-<digits><suffix>".
inline bool IsNumberedFileName(std::string_view name, std::string_view suffix) {
  if (name.size() <= 1 + suffix.size() || name[0] != 't' || !name.ends_with(suffix)) return false;
  const std::string_view middle = name.substr(1, name.size() - 1 - suffix.size());
  const size_t dash = middle.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash + 1 == middle.size()) return false;
  for (size_t i = 0; i < middle.size(); ++i) {
    if (i != dash && (middle[i] < '0' || middle[i] > '9')) return false;
  }
  return true;
}

// True for names of the DataFileName form ("t<digits>-<digits>.pages").
inline bool IsDataFileName(std::string_view name) { return IsNumberedFileName(name, ".pages"); }

// ---------------------------------------------------------------------------
// Format version 2 (docs/ssd-format.md, "Native format, version 2"): every
// row lives in an append-only log of segments, one log file per table,
// "t<table_id>-<file_number>.log", an array of segment slots of
// segment_bytes. A segment is a 4 KiB header block, then records of
// record_bytes back to back (record i at kSegmentHeaderBytes + i x
// record_bytes; records may straddle 4 KiB blocks). The MANIFEST (version 2)
// names each table's segments and how many records of each belong to the
// checkpoint (its extent).
inline constexpr uint16_t kFormatVersion2 = 2;
// The MANIFEST of a format-2 directory with a table of key ranges
// (SsdIndex::kRanges) is framed as version 3, its body that of version 2:
// a build that predates key ranges refuses it ("format version 3
// unsupported") instead of opening their base segments as a plain log.
inline constexpr uint16_t kFormatVersion3 = 3;
inline constexpr uint32_t kSegmentMagic = 0x53525453;  // "STRS"
inline constexpr uint32_t kSegmentHeaderBytes = kAlignBytes;
inline constexpr uint32_t kSegmentUser = 1;     // appended by MultiPut/Delete
inline constexpr uint32_t kSegmentCleaner = 2;  // live records copied by the cleaner
inline constexpr uint32_t kSegmentBase = 3;     // a key range's base, sorted by MixKey
// SegmentHeader::layout of a table of key ranges (SsdIndex::kRanges): this
// flag, the table's range bits << 16 and the segment's range. Zero: a table
// without ranges (every segment a log segment of any keys).
inline constexpr uint32_t kLayoutRanges = 1u << 31;
inline constexpr uint32_t RangesLayout(uint32_t range_bits, uint32_t range) {
  return kLayoutRanges | range_bits << 16 | range;
}
inline constexpr uint32_t LayoutRangeBits(uint32_t layout) { return (layout >> 16) & 0xFF; }
inline constexpr uint32_t LayoutRange(uint32_t layout) { return layout & 0xFFFF; }

struct SegmentHeader {
  uint64_t checksum;  // XXH3-64 of bytes [8, kSegmentHeaderBytes)
  uint32_t magic;     // kSegmentMagic
  uint16_t version;   // kFormatVersion2
  uint16_t kind;      // kSegmentUser, kSegmentCleaner or kSegmentBase
  uint32_t table_id;
  uint32_t row_bytes;
  uint32_t record_bytes;
  uint32_t layout;  // 0, or RangesLayout(range bits, range) (key ranges)
  uint64_t segment_seq;
};

// A record: 24-byte header, then the row (zero in a tombstone), its size
// rounded up to 8.
inline constexpr uint32_t kRecordHeaderBytes = 24;
inline constexpr uint8_t kRecordRow = 1;
inline constexpr uint8_t kRecordTombstone = 2;
inline constexpr uint64_t kRecordSeqMax = (uint64_t{1} << 48) - 1;
struct RecordHeader {
  uint64_t checksum;  // XXH3-64 of bytes [8, 24 + row_bytes), seeded by RecordSeed
  uint64_t key;
  uint64_t seq_kind;  // seq (48 bits: the table's write sequence) | kind << 48
};
static_assert(sizeof(RecordHeader) == kRecordHeaderBytes);

constexpr uint32_t RecordBytes(uint32_t row_bytes) {
  return (kRecordHeaderBytes + row_bytes + 7) / 8 * 8;
}

// Seed of the checksum of record `index` of segment `segment_seq` of a
// table: ties a record to its table and place, so a stale record of an
// earlier use of the slot or a misdirected write fails like a torn one.
constexpr uint64_t RecordSeed(TableId table, uint64_t segment_seq, uint64_t index) {
  return MixSplit64(MixSplit64((uint64_t{table} << 32) ^ 0x5354524153325632ull ^ segment_seq) ^
                    index);
}

// MANIFEST version 2: the version-1 header with version 2, then the meta,
// then per table a TableRecordV2, its name and segment_count
// SegmentRecords, then the checksum.
struct TableRecordV2 {
  uint32_t table_id;
  uint32_t row_bytes;
  uint32_t segment_bytes;
  uint32_t name_bytes;
  uint64_t file_number;       // log file "t<table_id>-<file_number>.log"
  uint64_t row_count;         // live rows (tombstones excluded)
  uint64_t next_seq;          // above every record seq of the table
  uint64_t next_segment_seq;  // above every segment_seq of the table
  uint64_t segment_count;
};
struct SegmentRecord {
  uint32_t slot;
  uint32_t record_count;  // the extent: records [0, record_count) are in the checkpoint
  uint64_t segment_seq;
};
static_assert(sizeof(SegmentRecord) == 16);

inline std::string LogDataFileName(TableId table, uint64_t file_number) {
  std::string name = "t";
  name += std::to_string(table);
  name += '-';
  name += std::to_string(file_number);
  name += ".log";
  return name;
}

// True for names of the LogDataFileName form ("t<digits>-<digits>.log").
inline bool IsLogDataFileName(std::string_view name) { return IsNumberedFileName(name, ".log"); }

}  // namespace strata::storage::ssd
