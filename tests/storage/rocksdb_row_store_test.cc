// strata-test-labels: unit
// RocksDB backend specifics: corrupted SST bytes give Corruption (never wrong
// data), and the on-disk layout (live/, ckpt-<n>/, CHECKPOINT) keeps only the
// last checkpoint.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

#include "storage/row_store_factory.h"
#include "tests/storage/row_store_test_util.h"

namespace strata::storage {
namespace {

using testing::Model;
using testing::PutRows;

constexpr uint32_t kRowBytes = 256;

class RocksDbRowStoreTest : public ::testing::Test {
 protected:
  RowStoreOptions Options() const {
    RowStoreOptions o;
    o.backend = SsdBackend::kRocksDb;
    o.dir = dir_.path() + "/store";
    o.rocksdb_block_cache_bytes = 1 << 20;
    return o;
  }
  testing::ScratchDir dir_;
};

TEST_F(RocksDbRowStoreTest, CorruptedSstGivesCorruptionNeverWrongData) {
  Model model;
  std::vector<Key> keys;
  for (Key k = 0; k < 2000; ++k) keys.push_back(k * 13);
  {
    auto store = OpenRowStore(Options(), {{1, "emb", kRowBytes}});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, keys, 0, &model).ok());
    ASSERT_TRUE((*store)->Checkpoint({}).ok());
  }
  // Flip bytes inside the data blocks of every SST of the checkpoint.
  int corrupted = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(Options().dir)) {
    if (e.path().extension() != ".sst" || e.path().string().find("ckpt-") == std::string::npos) {
      continue;
    }
    const int fd = ::open(e.path().c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    for (uint64_t off = 1000; off + 1 < e.file_size() / 2; off += 4096) {
      char b;
      ASSERT_EQ(::pread(fd, &b, 1, off), 1);
      b ^= 0x40;
      ASSERT_EQ(::pwrite(fd, &b, 1, off), 1);
      ++corrupted;
    }
    ::close(fd);
  }
  ASSERT_GT(corrupted, 0);
  auto store = OpenRowStore(Options(), {{1, "emb", kRowBytes}});
  if (!store.ok()) {
    EXPECT_TRUE(store.status().IsCorruption()) << store.status().ToString();
    return;
  }
  std::vector<std::byte> rows(kRowBytes);
  std::vector<uint8_t> found(1);
  int errors = 0;
  for (Key k : keys) {
    Status s = (*store)->MultiGet(1, std::vector<Key>{k}, rows, found);
    if (!s.ok()) {
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_NE(s.message().find(".sst"), std::string::npos) << s.ToString();
      ++errors;
      continue;
    }
    if (found[0]) {
      ASSERT_EQ(testing::Row(rows.begin(), rows.end()), model[k]) << "wrong data for key " << k;
    }
  }
  EXPECT_GT(errors, 0);
}

TEST_F(RocksDbRowStoreTest, OnlyTheLastCheckpointIsKept) {
  auto store = OpenRowStore(Options(), {{1, "emb", kRowBytes}});
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, {Key(i)}, i, nullptr).ok());
    ASSERT_TRUE((*store)->Checkpoint({}).ok());
  }
  std::vector<std::string> checkpoints;
  for (const auto& e : std::filesystem::directory_iterator(Options().dir)) {
    if (e.path().filename().string().starts_with("ckpt-")) {
      checkpoints.push_back(e.path().filename());
    }
  }
  ASSERT_EQ(checkpoints.size(), 1u);
  EXPECT_EQ(checkpoints[0], "ckpt-4");  // 1 at creation, then three more
}

}  // namespace
}  // namespace strata::storage
