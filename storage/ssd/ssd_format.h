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

// True for names of the DataFileName form ("t<digits>-<digits>.pages").
inline bool IsDataFileName(std::string_view name) {
  constexpr std::string_view kSuffix = ".pages";
  if (name.size() <= 1 + kSuffix.size() || name[0] != 't' || !name.ends_with(kSuffix)) return false;
  const std::string_view middle = name.substr(1, name.size() - 1 - kSuffix.size());
  const size_t dash = middle.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash + 1 == middle.size()) return false;
  for (size_t i = 0; i < middle.size(); ++i) {
    if (i != dash && (middle[i] < '0' || middle[i] > '9')) return false;
  }
  return true;
}

}  // namespace strata::storage::ssd
