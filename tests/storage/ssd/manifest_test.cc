// strata-test-labels: unit
// storage/ssd/manifest.cc: every size read from a MANIFEST is bounded by the file
// and the limits before anything is allocated or read whole, and each damage
// is a Corruption naming MANIFEST and the offset of the field at fault.
#include "storage/ssd/manifest.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "storage/ssd/limits.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::storage {
namespace {

using strata::testing::ScratchDir;

// Peak resident memory of this process (VmHWM), after ResetPeakRss.
class PeakRss {
 public:
  // Resets the peak to the current RSS; false where the kernel refuses.
  static bool Reset() {
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
    f.close();
    return f.good();
  }
  static uint64_t Bytes() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
      if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    }
    return 0;
  }
};

// Runs `fn` and expects it to hold no more than `bytes_max` of new resident
// memory at its peak (where the kernel lets the peak be reset).
void ExpectPeakRssBelow(uint64_t bytes_max, const std::function<void()>& fn) {
  const bool measured = PeakRss::Reset();
  const uint64_t before = PeakRss::Bytes();
  fn();
  if (!measured) return;  // /proc/self/clear_refs not writable: nothing to compare
  const uint64_t after = PeakRss::Bytes();
  EXPECT_LT(after - before, bytes_max) << "peak RSS grew by " << (after - before) << " bytes";
}

std::string ManifestPath(const std::string& dir) { return dir + "/" + ssd::kManifestName; }

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A MANIFEST of one 64-byte-row table with three leaves (one empty).
Manifest SmallManifest() {
  Manifest m;
  m.generation = 3;
  m.meta = {std::byte{7}, std::byte{8}};
  ManifestTable t;
  t.spec = {5, "emb", 64};
  t.page_bytes = ssd::PageBytes(64);
  t.file_number = 1;
  t.row_count = 5;
  t.leaves = {{0, 2, 2}, {100, ssd::kNoPage, 0}, {900, 0, 3}};
  m.tables.push_back(t);
  return m;
}

// Offsets in SmallManifest's encoding.
constexpr uint64_t kHeaderBytes = sizeof(ssd::ManifestHeader);
constexpr uint64_t kRecordAt = kHeaderBytes + 2;                          // after the 2 meta bytes
constexpr uint64_t kLeavesAt = kRecordAt + sizeof(ssd::TableRecord) + 3;  // after "emb"

void ExpectCorruptionAt(const Status& s, uint64_t offset, const std::string& what) {
  EXPECT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find("MANIFEST offset " + std::to_string(offset) + ": "), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.ToString();
}

TEST(ManifestTest, RoundTripNamesTheLeavesOffset) {
  const std::string bytes = EncodeManifest(SmallManifest());
  auto m = DecodeManifest(bytes, "MANIFEST");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(EncodeManifest(*m), bytes);
  ASSERT_EQ(m->tables.size(), 1u);
  EXPECT_EQ(m->tables[0].leaves_offset, kLeavesAt);
  EXPECT_TRUE(CheckManifestPages(m->tables[0], 3, "MANIFEST").ok());
  ExpectCorruptionAt(CheckManifestPages(m->tables[0], 2, "MANIFEST"), kLeavesAt + 8,
                     "page 2 lies beyond its data file of 2 pages");
}

// Each damage, with a valid checksum, names its field.
TEST(ManifestTest, DamageWithValidChecksumNamesTheField) {
  struct Case {
    const char* name;
    std::function<void(Manifest*)> damage;
    uint64_t offset;
    const char* what;
  };
  const Case cases[] = {
      {"page at the limit", [](Manifest* m) { m->tables[0].leaves[0].page = 0xFFFFFFFE; },
       kLeavesAt + 8, "above kPagesPerFileMax"},
      {"page twice", [](Manifest* m) { m->tables[0].leaves[2].page = 2; }, kLeavesAt + 32 + 8,
       "page 2 referenced twice"},
      {"rows over capacity", [](Manifest* m) { m->tables[0].leaves[0].row_count = 1000; },
       kLeavesAt + 12, "leaf row count 1000"},
      {"empty leaf with rows", [](Manifest* m) { m->tables[0].leaves[1].row_count = 1; },
       kLeavesAt + 16 + 12, "leaf without a page holds rows"},
      {"row count", [](Manifest* m) { m->tables[0].row_count = 6; }, kRecordAt + 24,
       "row count 6, its leaves hold 5"},
      {"unsorted", [](Manifest* m) { m->tables[0].leaves[2].low_mixed = 50; }, kLeavesAt + 32,
       "leaves unsorted"},
      {"first leaf", [](Manifest* m) { m->tables[0].leaves[0].low_mixed = 1; }, kLeavesAt,
       "first leaf does not start at 0"},
      {"page bytes", [](Manifest* m) { m->tables[0].page_bytes = 8192; }, kRecordAt + 8,
       "page bytes 8192"},
      {"row bytes", [](Manifest* m) { m->tables[0].spec.row_bytes = kRowBytesMax + 1; },
       kRecordAt + 4, "row bytes"},
      {"duplicate table id",
       [](Manifest* m) {
         m->tables.push_back(m->tables[0]);
         m->tables[1].spec.name = "other";
       },
       kLeavesAt + 3 * 16, "table id 5 appears twice"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Manifest m = SmallManifest();
    c.damage(&m);
    auto decoded = DecodeManifest(EncodeManifest(m), "MANIFEST");
    ASSERT_FALSE(decoded.ok());
    ExpectCorruptionAt(decoded.status(), c.offset, c.what);
  }
}

// Lengths in the header and records are checked against the bytes left
// before anything is sized by them.
TEST(ManifestTest, LengthsBeyondTheFileAreCorruptionWithoutAllocating) {
  const std::string good = EncodeManifest(SmallManifest());
  auto patch = [&](uint64_t offset, uint64_t value, size_t len) {
    std::string bytes = good;
    std::memcpy(bytes.data() + offset, &value, len);
    const uint64_t sum = XXH3_64bits(bytes.data(), bytes.size() - 8);
    std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
    return bytes;
  };
  ExpectPeakRssBelow(64ull << 20, [&] {
    ExpectCorruptionAt(DecodeManifest(patch(24, 64ull << 20, 8), "MANIFEST").status(), 24,
                       "meta length");
    ExpectCorruptionAt(DecodeManifest(patch(32, 1ull << 62, 8), "MANIFEST").status(), 32,
                       "does not match the file size");
    ExpectCorruptionAt(DecodeManifest(patch(kRecordAt + 32, 1ull << 31, 8), "MANIFEST").status(),
                       kRecordAt + 32, "leaf count 2147483648 overruns the body");
    ExpectCorruptionAt(DecodeManifest(patch(12, 5000, 4), "MANIFEST").status(), 12,
                       "table count 5000");
  });
}

// A file of `bytes` bytes, sparse, starting with `head`.
void MakeSparse(const std::string& path, const std::string& head, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, head.data(), head.size(), 0), ssize_t(head.size()));
  ASSERT_EQ(::ftruncate(fd, off_t(bytes)), 0);
  ::close(fd);
}

Status TimedRead(const std::string& dir, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  auto r = ReadManifest(io::Env::Default(), dir);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r.status();
}

// A 2 GiB MANIFEST is refused from its header: not read whole, not allocated.
TEST(ManifestTest, LargeFileWithBadHeaderIsRefusedBeforeReadingIt) {
  ScratchDir dir;
  const uint64_t file_bytes = 2ull << 30;
  std::string header = EncodeManifest(SmallManifest()).substr(0, kHeaderBytes);
  struct Case {
    const char* name;
    uint64_t offset;  // the header field damaged
    uint64_t value;
    const char* what;
  };
  const Case cases[] = {
      {"wrong magic", 0, 0x4B4E554A4B4E554Aull, "bad magic"},
      {"huge body_bytes", 32, 1ull << 62, "does not match the file size"},
      {"version", 8, 2, "format version 2 unsupported"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string head = header;
    std::memcpy(head.data() + c.offset, &c.value, c.offset == 8 ? 4 : 8);
    MakeSparse(ManifestPath(dir.path()), head, file_bytes);
    double seconds = 0;
    ExpectPeakRssBelow(64ull << 20, [&] {
      ExpectCorruptionAt(TimedRead(dir.path(), &seconds), c.offset, c.what);
    });
    EXPECT_LT(seconds, 0.5) << "the header alone decides";
  }
}

// A MANIFEST with a valid checksum naming page 2^32 - 16 of a small data file:
// Open fails with Corruption naming the leaf, allocates no page states for
// 2^32 pages and leaves the data file as it was.
TEST(ManifestTest, PageBeyondTheDataFileFailsOpenWithoutAllocating) {
  ScratchDir dir;
  RowStoreOptions options;
  options.dir = dir.path();
  options.ssd_format_version = 1;  // leaves named by the MANIFEST
  const std::vector<TableSpec> tables = {{1, "t", 64}};
  {
    auto store = OpenRowStore(options, tables);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(testing::PutRows(**store, 1, 64, {1, 2, 3, 4, 5, 6, 7, 8, 9}, 1, nullptr).ok());
    ASSERT_TRUE((*store)->Checkpoint({}).ok());
  }
  auto read = ReadManifest(io::Env::Default(), dir.path());
  ASSERT_TRUE(read.ok() && read->has_value());
  Manifest m = **read;
  ASSERT_NE(m.tables[0].leaves.back().page, ssd::kNoPage);
  m.tables[0].leaves.back().page = 0xFFFFFFF0u;
  WriteBytes(ManifestPath(dir.path()), EncodeManifest(m));
  const std::string data = dir.path() + "/" + ssd::DataFileName(1, m.tables[0].file_number);
  const uint64_t data_bytes = std::filesystem::file_size(data);

  ExpectPeakRssBelow(256ull << 20, [&] {
    auto store = OpenRowStore(options, tables);
    ASSERT_FALSE(store.ok());
    const uint64_t leaf_at = (*read)->tables[0].leaves_offset +
                             (m.tables[0].leaves.size() - 1) * sizeof(ssd::LeafRecord) + 8;
    ExpectCorruptionAt(store.status(), leaf_at, "page 4294967280 lies beyond its data file");
  });
  EXPECT_EQ(std::filesystem::file_size(data), data_bytes);
}

}  // namespace
}  // namespace strata::storage
