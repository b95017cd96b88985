// Fuzz target: the native store's MANIFEST reader (storage/ssd/manifest.cc,
// docs/ssd-format.md).
//
// The input is a MANIFEST file. It is decoded twice: as it is, and with its
// trailing XXH3 checksum recomputed, so that mutations get past the checksum
// to the checks of every length, count and leaf. Properties:
// - decoding never crashes, and allocates no more than the file's size allows
//   (libFuzzer's -malloc_limit_mb catches a length trusted before the check);
// - a failure is a Corruption naming MANIFEST and an offset;
// - ReadManifest on the file gives what DecodeManifest gives on its bytes;
// - a MANIFEST that decodes encodes back to the same bytes (one encoding);
// - CheckManifestPages, Open's check of the pages against the data file,
//   fails only as a Corruption naming MANIFEST and an offset.
#include <xxhash.h>

#include <cstring>
#include <string>

#include "base/assert.h"
#include "io/env.h"
#include "storage/ssd/manifest.h"
#include "tests/fuzz/fuzz_util.h"

namespace strata::fuzz {
namespace {

void Check(const std::string& bytes) {
  const std::string dir = ScratchDir();
  const std::string path = dir + "/" + storage::ssd::kManifestName;
  Result<storage::Manifest> decoded = storage::DecodeManifest(bytes, path);
  WriteFile(path, bytes.data(), bytes.size());
  Result<std::optional<storage::Manifest>> read = storage::ReadManifest(io::Env::Default(), dir);
  if (!decoded.ok()) {
    CheckError(decoded.status(), StatusCode::kCorruption, {path, " offset "});
    STRATA_ASSERT(!read.ok(), "fuzz: ReadManifest accepts what DecodeManifest refuses");
    CheckError(read.status(), StatusCode::kCorruption, {path, " offset "});
    return;
  }
  STRATA_ASSERT(read.ok() && read->has_value(), "fuzz: ReadManifest refuses a valid MANIFEST");
  STRATA_ASSERT(storage::EncodeManifest(**read) == bytes, "fuzz: ReadManifest differs");
  STRATA_ASSERT(storage::EncodeManifest(*decoded) == bytes,
                "fuzz: a decoded MANIFEST does not encode back to its bytes");
  // What Open checks next: the pages against the data file's size (here as
  // many pages as the table has leaves).
  for (const storage::ManifestTable& t : decoded->tables) {
    const Status s = storage::CheckManifestPages(t, t.leaves.size(), path);
    if (!s.ok()) CheckError(s, StatusCode::kCorruption, {path, " offset "});
  }
}

}  // namespace
}  // namespace strata::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  strata::fuzz::Check(bytes);
  if (size >= 8) {
    std::string repaired = bytes;
    const uint64_t sum = XXH3_64bits(repaired.data(), size - 8);
    std::memcpy(repaired.data() + size - 8, &sum, 8);
    if (repaired != bytes) strata::fuzz::Check(repaired);
  }
  return 0;
}
