// Fuzz target: the native store's leaf page verifier and decoder
// (storage/ssd/page_file.cc VerifyPage; native::Table::CountOf, KeyAt, RowAt;
// layout in docs/ssd-format.md).
//
// Input: a 16-byte prefix (u32 row_bytes, u32 table id, u64 low_mixed: what
// the directory expects of the page), then the page, cut or zero-padded to
// PageBytes(row_bytes). row_bytes is taken modulo 8192 (plus one): pages up
// to 32 KiB keep the runs fast; larger rows only grow the page in 4 KiB
// steps. The page is verified twice: as it is, and with its checksum
// recomputed, so that mutations reach the header checks. Properties:
// - VerifyPage never crashes; a failure is a Corruption naming the file and
//   the page's offset, as the store reports it;
// - a page that verifies is decoded the way MultiGet and Scan decode it,
//   every key and row inside the page (ASan checks each read), and
//   re-sealing it with its own header gives the same bytes (one encoding).
#include <xxhash.h>

#include <cstring>
#include <string>

#include "base/assert.h"
#include "io/aligned.h"
#include "storage/ssd/native_table.h"
#include "storage/ssd/page_file.h"
#include "tests/fuzz/fuzz_util.h"

namespace strata::fuzz {
namespace {

constexpr size_t kPrefixBytes = 16;
constexpr uint32_t kRowBytesFuzzMax = 8192;
constexpr uint64_t kPageOffset = 7 * 4096;  // where the store would have read it

struct Expect {
  uint32_t row_bytes;
  TableId table;
  uint64_t low_mixed;
};

void Check(const std::byte* page, const storage::native::Table& t, uint64_t low_mixed) {
  const std::string path = "t" + std::to_string(t.spec.id) + "-1.pages";
  const Status s =
      storage::VerifyPage(page, t.page_bytes, t.capacity, t.spec.id, low_mixed, path, kPageOffset);
  if (!s.ok()) {
    CheckError(s, StatusCode::kCorruption, {path, " offset " + std::to_string(kPageOffset)});
    return;
  }
  const uint16_t count = t.CountOf(page);
  STRATA_ASSERT(count <= t.capacity, "fuzz: a verified page holds more rows than it can");
  uint64_t sum = 0;
  for (uint32_t s = 0; s < count; ++s) {
    const std::byte* row = t.RowAt(page, s);
    STRATA_ASSERT(row >= page && row + t.spec.row_bytes <= page + t.page_bytes,
                  "fuzz: a row lies outside its page");
    sum += t.KeyAt(page, s) + XXH3_64bits(row, t.spec.row_bytes);
  }
  // Sealing the page again with what it says of itself changes nothing but
  // the reserved field, which the writer always zeroes.
  std::string copy(reinterpret_cast<const char*>(page), t.page_bytes);
  storage::ssd::PageHeader h;
  std::memcpy(&h, page, sizeof(h));
  storage::SealPage(reinterpret_cast<std::byte*>(copy.data()), t.page_bytes, t.spec.id, count,
                    low_mixed);
  if (h.reserved == 0) {
    STRATA_ASSERT(std::memcmp(copy.data(), page, t.page_bytes) == 0,
                  "fuzz: a verified page does not seal back to its bytes");
  }
  (void)sum;
}

}  // namespace
}  // namespace strata::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  if (size < fuzz::kPrefixBytes) return 0;
  fuzz::Expect e;
  std::memcpy(&e.row_bytes, data, 4);
  std::memcpy(&e.table, data + 4, 4);
  std::memcpy(&e.low_mixed, data + 8, 8);
  storage::native::Table t;
  t.spec.id = e.table;
  t.spec.row_bytes = 1 + e.row_bytes % fuzz::kRowBytesFuzzMax;
  t.page_bytes = storage::ssd::PageBytes(t.spec.row_bytes);
  t.capacity = storage::ssd::PageCapacity(t.spec.row_bytes);
  auto buf = io::AlignedBuffer::Allocate(t.page_bytes);
  STRATA_ASSERT(buf.ok(), "fuzz: page buffer");
  auto* page = reinterpret_cast<std::byte*>(buf->data());
  std::memset(page, 0, t.page_bytes);
  std::memcpy(page, data + fuzz::kPrefixBytes,
              std::min<size_t>(size - fuzz::kPrefixBytes, t.page_bytes));
  fuzz::Check(page, t, e.low_mixed);
  const uint64_t sum = XXH3_64bits(page + 8, t.page_bytes - 8);
  if (std::memcmp(page, &sum, 8) != 0) {
    std::memcpy(page, &sum, 8);
    fuzz::Check(page, t, e.low_mixed);
  }
  return 0;
}
