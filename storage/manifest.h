// The native store's MANIFEST: the complete description of one checkpoint
// (tables, each table's data file and leaf directory, the opaque checkpoint
// meta). Layout in ssd_format.h and docs/ssd-format.md.
//
// WriteManifest switches it atomically: write MANIFEST.tmp, fsync it, rename
// it over MANIFEST, fsync the directory. A crash at any point leaves either
// the old or the new MANIFEST, whole. ReadManifest verifies the checksum and
// every length before using a byte.
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
#include "storage/row_store.h"
#include "storage/ssd_format.h"

namespace strata::storage {

struct ManifestTable {
  TableSpec spec;
  uint32_t page_bytes = 0;
  uint64_t file_number = 0;
  uint64_t row_count = 0;
  std::vector<ssd::LeafRecord> leaves;
};

struct Manifest {
  uint64_t generation = 0;
  std::vector<std::byte> meta;
  std::vector<ManifestTable> tables;
};

std::string EncodeManifest(const Manifest& manifest);
// Corruption naming `path` and the offset of the first bad field.
[[nodiscard]] Result<Manifest> DecodeManifest(const std::string& bytes, const std::string& path);

// Writes and switches dir/MANIFEST; `*bytes_written` gets its size. On
// failure `*in_doubt` tells whether the rename was attempted: false, the old
// MANIFEST is still the one on disk; true (the rename or the directory fsync
// failed), either MANIFEST may be the one a crash leaves, so the caller must
// keep everything both reference.
[[nodiscard]] Status WriteManifest(io::Env* env, const std::string& dir, const Manifest& manifest,
                                   uint64_t* bytes_written, bool* in_doubt);
// The manifest of `dir`, or nullopt when it has none.
[[nodiscard]] Result<std::optional<Manifest>> ReadManifest(io::Env* env, const std::string& dir);

}  // namespace strata::storage
