// strata-test-labels: unit
// A native store directory of format version 1, written by the version-1
// code and checked in (tests/storage/ssd/data/native-v1/), opens read-write
// and gives exactly the checkpoint it was written with. It pins version 1
// before version 2 (docs/ssd-format.md, issue 18) replaces the writer: a
// build must keep opening what earlier builds wrote, and this fixture is the
// only version-1 writer left once version 2 lands.
//
// The fixture: two tables (64- and 520-byte rows), two checkpoints (the
// second overwrites and adds rows, with meta "native-v1-fixture"), then rows
// written after the last checkpoint (in the data files, not in any
// checkpoint: a reopen must drop them). To write it again (only with a build
// of format version 1):
//   STRATA_WRITE_NATIVE_V1_FIXTURE=tests/storage/ssd/data/native-v1 \
//     build/bin/storage_ssd_native_v1_directory_test
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/source_files.h"

namespace strata::storage {
namespace {

using testing::Bytes;
using testing::ExpectContent;
using testing::Model;
using testing::PutRows;

constexpr TableId kNarrow = 1, kWide = 2;
constexpr uint32_t kNarrowBytes = 64, kWideBytes = 520;
constexpr char kMeta[] = "native-v1-fixture";

std::vector<TableSpec> Specs() {
  return {{kNarrow, "narrow", kNarrowBytes}, {kWide, "wide", kWideBytes}};
}

// Keys of table `t`, step `step` of the fixture: spread over the key space,
// the extremes 0 and 2^64-1 in the first step.
std::vector<Key> KeysOf(TableId t, int step, size_t n) {
  std::vector<Key> keys;
  if (step == 0) keys = {0, ~Key{0}};
  for (size_t i = keys.size(); i < n; ++i) {
    keys.push_back((uint64_t(t) << 56) ^ (uint64_t(step) << 48) ^ (i * 0x9E3779B97F4A7C15ull));
  }
  return keys;
}

struct Fixture {
  Model narrow, wide;
};

// Runs the fixture's writes against `store`; `model` gets the rows of the
// last checkpoint.
Status WriteFixture(RowStore& store, Fixture* model) {
  Model narrow, wide;
  const auto narrow0 = KeysOf(kNarrow, 0, 1000), wide0 = KeysOf(kWide, 0, 120);
  STRATA_RETURN_IF_ERROR(PutRows(store, kNarrow, kNarrowBytes, narrow0, 0, &narrow));
  STRATA_RETURN_IF_ERROR(PutRows(store, kWide, kWideBytes, wide0, 0, &wide));
  STRATA_RETURN_IF_ERROR(store.Checkpoint(Bytes("first")));
  // Overwrite a fifth, add new keys.
  const std::vector<Key> narrow_over(narrow0.begin(), narrow0.begin() + 200);
  const std::vector<Key> wide_over(wide0.begin(), wide0.begin() + 24);
  STRATA_RETURN_IF_ERROR(PutRows(store, kNarrow, kNarrowBytes, narrow_over, 1, &narrow));
  STRATA_RETURN_IF_ERROR(PutRows(store, kWide, kWideBytes, wide_over, 1, &wide));
  STRATA_RETURN_IF_ERROR(PutRows(store, kNarrow, kNarrowBytes, KeysOf(kNarrow, 1, 50), 1, &narrow));
  STRATA_RETURN_IF_ERROR(store.Checkpoint(Bytes(kMeta)));
  model->narrow = narrow;
  model->wide = wide;
  // After the last checkpoint: overwrites and new keys no reopen may show.
  STRATA_RETURN_IF_ERROR(PutRows(store, kNarrow, kNarrowBytes, narrow_over, 9, nullptr));
  STRATA_RETURN_IF_ERROR(PutRows(store, kWide, kWideBytes, KeysOf(kWide, 2, 30), 9, nullptr));
  return Status::Ok();
}

// The model of the fixture's last checkpoint, computed by running the same
// writes against a scratch store.
Fixture ExpectedFixture(const std::string& scratch) {
  RowStoreOptions o;
  o.dir = scratch;
  auto store = OpenRowStore(o, Specs());
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  Fixture f;
  if (store.ok()) EXPECT_TRUE(WriteFixture(**store, &f).ok());
  return f;
}

std::string FixtureDir() {
  return strata::testing::SourceDir() + "/tests/storage/ssd/data/native-v1";
}

uint32_t ManifestVersion(const std::string& dir) {
  std::ifstream in(dir + "/MANIFEST", std::ios::binary);
  char header[12] = {};
  in.read(header, sizeof(header));
  uint32_t version = 0;
  std::memcpy(&version, header + 8, 4);
  return version;
}

class NativeV1DirectoryTest : public ::testing::Test {
 protected:
  // A copy of the checked-in fixture (opening read-write changes it).
  std::string CopyFixture() {
    const std::string dir = dir_.File("v1");
    std::filesystem::copy(FixtureDir(), dir, std::filesystem::copy_options::recursive);
    return dir;
  }
  RowStoreOptions Options(const std::string& dir) {
    RowStoreOptions o;
    o.backend = SsdBackend::kNative;
    o.dir = dir;
    return o;
  }

  strata::testing::ScratchDir dir_;
};

TEST(NativeV1FixtureWriter, WritesTheFixtureWhenAsked) {
  const char* out = std::getenv("STRATA_WRITE_NATIVE_V1_FIXTURE");
  if (out == nullptr) GTEST_SKIP() << "STRATA_WRITE_NATIVE_V1_FIXTURE not set";
  ASSERT_FALSE(std::filesystem::exists(out)) << out << " exists; remove it first";
  RowStoreOptions o;
  o.dir = out;
  auto store = OpenRowStore(o, Specs());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Fixture f;
  ASSERT_TRUE(WriteFixture(**store, &f).ok());
}

TEST_F(NativeV1DirectoryTest, FixtureIsVersion1) {
  ASSERT_TRUE(std::filesystem::exists(FixtureDir() + "/MANIFEST")) << FixtureDir();
  EXPECT_EQ(ManifestVersion(FixtureDir()), 1u);
}

TEST_F(NativeV1DirectoryTest, OpensAndGivesItsLastCheckpointExactly) {
  const Fixture expected = ExpectedFixture(dir_.File("model"));
  const std::string dir = CopyFixture();
  auto store = OpenRowStore(Options(dir), Specs());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->CheckpointMeta(), Bytes(kMeta));
  ExpectContent(**store, kNarrow, kNarrowBytes, expected.narrow, KeysOf(kNarrow, 2, 10));
  ExpectContent(**store, kWide, kWideBytes, expected.wide, KeysOf(kWide, 2, 30));
}

TEST_F(NativeV1DirectoryTest, TakesWritesAndCheckpointsAndReopens) {
  Fixture expected = ExpectedFixture(dir_.File("model"));
  const std::string dir = CopyFixture();
  {
    auto store = OpenRowStore(Options(dir), Specs());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    const auto wide0 = KeysOf(kWide, 0, 120);
    ASSERT_TRUE(
        PutRows(**store, kWide, kWideBytes, {wide0.begin(), wide0.begin() + 60}, 5, &expected.wide)
            .ok());
    ASSERT_TRUE(
        PutRows(**store, kNarrow, kNarrowBytes, KeysOf(kNarrow, 3, 300), 5, &expected.narrow).ok());
    ASSERT_TRUE((*store)->Checkpoint(Bytes("after")).ok());
  }
  auto store = OpenRowStore(Options(dir), Specs());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->CheckpointMeta(), Bytes("after"));
  ExpectContent(**store, kNarrow, kNarrowBytes, expected.narrow);
  ExpectContent(**store, kWide, kWideBytes, expected.wide);
}

TEST_F(NativeV1DirectoryTest, OtherTablesAreRefusedAndNothingChanges) {
  const std::string dir = CopyFixture();
  auto store =
      OpenRowStore(Options(dir), {{kNarrow, "narrow", kNarrowBytes}, {kWide, "wide", 512}});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument) << store.status().ToString();
  for (const auto& e : std::filesystem::directory_iterator(FixtureDir())) {
    const auto copy = std::filesystem::path(dir) / e.path().filename();
    ASSERT_TRUE(std::filesystem::exists(copy)) << copy;
    EXPECT_EQ(std::filesystem::file_size(copy), std::filesystem::file_size(e.path())) << copy;
  }
}

}  // namespace
}  // namespace strata::storage
