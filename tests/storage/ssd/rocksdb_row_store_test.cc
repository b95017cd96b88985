// strata-test-labels: unit
// RocksDB backend specifics: corrupted SST bytes give Corruption (never wrong
// data), injected EIO/ENOSPC (through a rocksdb::FileSystem wrapper) give an
// error and lose nothing, and the on-disk layout (live/, ckpt-<n>/,
// CHECKPOINT) keeps only the last checkpoint.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/rocksdb_test_util.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::storage {
namespace {

using testing::FaultFs;
using testing::Model;
using testing::PutRows;

constexpr uint32_t kRowBytes = 256;

class RocksDbRowStoreTest : public ::testing::Test {
 protected:
  RowStoreOptions Options() const { return testing::RocksDbTestOptions(dir_.path() + "/store"); }
  strata::testing::ScratchDir dir_;
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

TEST_F(RocksDbRowStoreTest, InjectedWriteErrorsLoseNothing) {
  for (bool no_space : {false, true}) {
    auto fs = std::make_shared<FaultFs>(rocksdb::FileSystem::Default());
    fs->no_space = no_space;
    std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
    RowStoreOptions o = Options();
    o.rocksdb_env = env.get();
    Model model, checkpointed;
    std::vector<Key> keys;
    for (Key k = 0; k < 1000; ++k) keys.push_back(k * 7);
    {
      auto store = OpenRowStore(o, {{1, "emb", kRowBytes}});
      ASSERT_TRUE(store.ok()) << store.status().ToString();
      ASSERT_TRUE(PutRows(**store, 1, kRowBytes, keys, 0, &model).ok());
      ASSERT_TRUE((*store)->Checkpoint(testing::Bytes("one")).ok());
      checkpointed = model;
      ASSERT_TRUE(PutRows(**store, 1, kRowBytes, keys, 1, &model).ok());  // in the memtable
      fs->fail_writes = true;
      Status s = (*store)->Checkpoint(testing::Bytes("two"));
      EXPECT_FALSE(s.ok());
      EXPECT_TRUE(s.IsIOError() || s.IsResourceExhausted()) << s.ToString();
      fs->fail_writes = false;
      // Nothing was lost: the rows written before the failure still read back.
      testing::ExpectContent(**store, 1, kRowBytes, model);
      EXPECT_EQ((*store)->CheckpointMeta(), testing::Bytes("one"));
    }
    auto store = OpenRowStore(o, {{1, "emb", kRowBytes}});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->CheckpointMeta(), testing::Bytes("one"));
    testing::ExpectContent(**store, 1, kRowBytes, checkpointed);
    // The reopened store works: a new checkpoint sticks.
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, {3, 5}, 2, &checkpointed).ok());
    ASSERT_TRUE((*store)->Checkpoint(testing::Bytes("three")).ok());
    EXPECT_EQ((*store)->CheckpointMeta(), testing::Bytes("three"));
    store->reset();
    std::error_code ignored;
    std::filesystem::remove_all(o.dir, ignored);
  }
}

TEST_F(RocksDbRowStoreTest, InjectedReadErrorIsIOError) {
  auto fs = std::make_shared<FaultFs>(rocksdb::FileSystem::Default());
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  RowStoreOptions o = Options();
  o.rocksdb_env = env.get();
  Model model;
  std::vector<Key> keys;
  for (Key k = 0; k < 500; ++k) keys.push_back(k);
  {
    auto store = OpenRowStore(o, {{1, "emb", kRowBytes}});
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, keys, 0, &model).ok());
    ASSERT_TRUE((*store)->Checkpoint({}).ok());
  }
  auto store = OpenRowStore(o, {{1, "emb", kRowBytes}});  // cold block cache
  ASSERT_TRUE(store.ok());
  fs->fail_reads = true;
  std::vector<std::byte> rows(keys.size() * kRowBytes);
  std::vector<uint8_t> found(keys.size());
  Status s = (*store)->MultiGet(1, keys, rows, found);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  fs->fail_reads = false;
  testing::ExpectContent(**store, 1, kRowBytes, model);
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
