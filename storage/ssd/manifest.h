// The native store's MANIFEST: the complete description of one checkpoint
// (tables, each table's data file and leaf directory, the opaque checkpoint
// meta). Layout in ssd_format.h and docs/ssd-format.md.
//
// WriteManifest switches it atomically: write MANIFEST.tmp, fsync it, rename
// it over MANIFEST, fsync the directory. A crash at any point leaves either
// the old or the new MANIFEST, whole. ReadManifest reads and checks the
// header (magic, version, body length against the file size) before reading
// the rest, then verifies the checksum; every count and length is bounded by
// the bytes left and the limits in limits.h before anything is sized by it.
// Errors are Corruption naming MANIFEST and the offset of the field at fault.
//
// Thread safety: pure functions of their arguments; the caller serialises
// writers of one directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/env.h"
#include "storage/ssd/row_store.h"
#include "storage/ssd/ssd_format.h"

namespace strata::storage {

struct ManifestTable {
  TableSpec spec;
  uint32_t page_bytes = 0;
  uint64_t file_number = 0;
  uint64_t row_count = 0;
  std::vector<ssd::LeafRecord> leaves;
  // Offset of leaves[0] in the MANIFEST it was read from (errors name it).
  uint64_t leaves_offset = 0;
};

struct Manifest {
  uint64_t generation = 0;
  std::vector<std::byte> meta;
  std::vector<ManifestTable> tables;
};

std::string EncodeManifest(const Manifest& manifest);
// Corruption naming `path` and the offset of the first bad field. Checks
// everything a MANIFEST alone can prove (docs/ssd-format.md): lengths, the
// checksum, table ids unique, leaves sorted from 0, row counts within a
// page's capacity and adding up, page numbers below kPagesPerFileMax and each
// referenced once.
[[nodiscard]] Result<Manifest> DecodeManifest(const std::string& bytes, const std::string& path);
// Corruption naming `path` and the offset of the first leaf of `table` whose
// page lies at or beyond `file_pages`, the whole pages of its data file.
[[nodiscard]] Status CheckManifestPages(const ManifestTable& table, uint64_t file_pages,
                                        const std::string& path);

// Writes and switches dir/MANIFEST; `*bytes_written` gets its size. On
// failure `*in_doubt` tells whether the rename was attempted: false, the old
// MANIFEST is still the one on disk; true (the rename or the directory fsync
// failed), either MANIFEST may be the one a crash leaves, so the caller must
// keep everything both reference.
[[nodiscard]] Status WriteManifest(io::Env* env, const std::string& dir, const Manifest& manifest,
                                   uint64_t* bytes_written, bool* in_doubt);
// The manifest of `dir`, or nullopt when it has none.
[[nodiscard]] Result<std::optional<Manifest>> ReadManifest(io::Env* env, const std::string& dir);

// The format version of dir/MANIFEST (1 or 2), or nullopt when it has none;
// Corruption naming it when its header is unreadable or of another version.
[[nodiscard]] Result<std::optional<uint32_t>> ReadManifestVersion(io::Env* env,
                                                                  const std::string& dir);

// Format version 2 (docs/ssd-format.md, "Native format, version 2").
struct ManifestTableV2 {
  TableSpec spec;
  uint32_t segment_bytes = 0;
  uint64_t file_number = 0;
  uint64_t row_count = 0;
  uint64_t next_seq = 0;
  uint64_t next_segment_seq = 0;
  std::vector<ssd::SegmentRecord> segments;
  // Offset of segments[0] in the MANIFEST it was read from (errors name it).
  uint64_t segments_offset = 0;
};

struct ManifestV2 {
  uint64_t generation = 0;
  // A table has key ranges: framed as ssd::kFormatVersion3 (same body).
  bool ranges = false;
  std::vector<std::byte> meta;
  std::vector<ManifestTableV2> tables;
};

// Records a segment of `segment_bytes` holds for rows of `row_bytes`.
inline uint64_t SegmentCapacity(uint64_t segment_bytes, uint32_t row_bytes) {
  return (segment_bytes - ssd::kSegmentHeaderBytes) / ssd::RecordBytes(row_bytes);
}
// A power of two in [kSegmentBytesMin, kSegmentBytesMax] holding at least
// one record of `row_bytes`.
bool ValidSegmentBytes(uint64_t segment_bytes, uint32_t row_bytes);
// Record addresses (CompactIndex::kPayloadBits bits).
inline constexpr uint64_t kLogAddressMax = (uint64_t{1} << 34) - 1;

std::string EncodeManifestV2(const ManifestV2& manifest);
// Corruption naming `path` and the offset of the first bad field: lengths,
// the checksum, table ids unique, segment sizes valid, slots below
// kLogSlotsMax and unique, extents within a segment, segment seqs unique and
// below next_segment_seq.
[[nodiscard]] Result<ManifestV2> DecodeManifestV2(const std::string& bytes,
                                                  const std::string& path);
[[nodiscard]] Status WriteManifestV2(io::Env* env, const std::string& dir,
                                     const ManifestV2& manifest, uint64_t* bytes_written,
                                     bool* in_doubt);
[[nodiscard]] Result<std::optional<ManifestV2>> ReadManifestV2(io::Env* env,
                                                               const std::string& dir);

}  // namespace strata::storage
