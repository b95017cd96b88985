// strata-test-labels: unit
// Native backend: crash simulation with io::FaultEnv (unsynced writes dropped
// at random points, reopen equals the last checkpoint exactly), corrupted and
// torn pages (Corruption naming file and offset, never wrong data), injected
// EIO/ENOSPC (an error, nothing lost), space amplification after garbage
// collection and the DRAM index bound.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "io/fault_env.h"
#include "storage/ssd/row_store_factory.h"
#include "storage/ssd/ssd_format.h"
#include "tests/storage/ssd/row_store_test_util.h"

namespace strata::storage {
namespace {

using testing::Bytes;
using testing::ExpectContent;
using testing::Model;
using testing::PutRows;

constexpr uint32_t kRowBytes = 512;  // 64 floats of embedding + 64 of state

class NativeRowStoreTest : public testing::NativeRowStoreFixture {
 protected:
  NativeRowStoreTest() : NativeRowStoreFixture(3, kRowBytes) {}
  std::string DataFile() {
    auto names = io::Env::Default()->ListDir(Options().dir);
    for (const std::string& n : names.value()) {
      if (n.ends_with(".pages")) return Options().dir + "/" + n;
    }
    return "";
  }
};

TEST_F(NativeRowStoreTest, CrashAtRandomPointsGivesLastCheckpointExactly) {
  std::mt19937_64 rng(3);
  Model model, checkpointed;
  std::string checkpointed_meta;
  auto store = Open();
  ASSERT_NE(store, nullptr);
  for (int step = 0; step < 150; ++step) {
    std::vector<Key> keys(1 + rng() % 200);
    for (Key& k : keys) k = rng() % 5000;
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2:
      case 3:
        ASSERT_TRUE(PutRows(*store, 3, kRowBytes, keys, step, &model).ok());
        break;
      case 4:
        ASSERT_TRUE(store->Delete(3, keys).ok());
        for (Key k : keys) model.erase(k);
        break;
      case 5:
      case 6: {
        checkpointed_meta = "ckpt " + std::to_string(step);
        ASSERT_TRUE(store->Checkpoint(Bytes(checkpointed_meta)).ok());
        checkpointed = model;
        break;
      }
      default: {  // power loss: unsynced writes vanish, the store is reopened
        ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
        store.reset();
        store = Open();
        ASSERT_NE(store, nullptr);
        EXPECT_EQ(store->CheckpointMeta(), Bytes(checkpointed_meta));
        model = checkpointed;
        ExpectContent(*store, 3, kRowBytes, model);
        EXPECT_EQ(store->Stats().live_rows, model.size());
      }
    }
  }
}

TEST_F(NativeRowStoreTest, CrashDuringCheckpointGivesOldOrNewCheckpoint) {
  // Fail each step of the manifest switch in turn, then lose power.
  const std::vector<std::pair<io::FaultOp, std::string>> points = {
      {io::FaultOp::kSync, ".pages"},
      {io::FaultOp::kWrite, "MANIFEST.tmp"},
      {io::FaultOp::kSync, "MANIFEST.tmp"},
      {io::FaultOp::kRename, "MANIFEST"},
      {io::FaultOp::kSyncDir, ""}};
  Model old_model;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(PutRows(*store, 3, kRowBytes, {1, 2, 3}, 0, &old_model).ok());
    ASSERT_TRUE(store->Checkpoint(Bytes("old")).ok());
  }
  for (const auto& [op, path] : points) {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    Model new_model = old_model;
    ASSERT_TRUE(PutRows(*store, 3, kRowBytes, {2, 4, 5000}, 1, &new_model).ok());
    io::FaultRule rule;
    rule.op = op;
    rule.path_substring = path;
    ASSERT_TRUE(fault_env_.AddRule(rule).ok());
    Status s = store->Checkpoint(Bytes("new"));
    EXPECT_TRUE(s.IsIOError()) << io::FaultOpName(op) << " " << path << ": " << s.ToString();
    fault_env_.ClearRules();
    ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
    store.reset();
    store = Open();
    ASSERT_NE(store, nullptr);
    // The switch failed before it was durable: the old checkpoint, exactly.
    EXPECT_EQ(store->CheckpointMeta(), Bytes("old")) << io::FaultOpName(op);
    ExpectContent(*store, 3, kRowBytes, old_model, {4, 5000});
  }
}

TEST_F(NativeRowStoreTest, CorruptedPageGivesCorruptionNamingFileAndOffset) {
  Model model;
  std::vector<Key> keys;
  for (Key k = 0; k < 200; ++k) keys.push_back(k);
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(PutRows(*store, 3, kRowBytes, keys, 0, &model).ok());
    ASSERT_TRUE(store->Checkpoint({}).ok());
  }
  const std::string file = DataFile();
  const uint32_t page_bytes = ssd::PageBytes(kRowBytes);
  for (uint64_t offset : {uint64_t{page_bytes} + 700, uint64_t{3}}) {  // a row byte, the checksum
    const int fd = ::open(file.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    char b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, offset), 1);
    b ^= 0x10;
    ASSERT_EQ(::pwrite(fd, &b, 1, offset), 1);
    ::close(fd);
    auto store = Open();
    ASSERT_NE(store, nullptr);
    std::vector<std::byte> rows(keys.size() * kRowBytes);
    std::vector<uint8_t> found(keys.size());
    Status s = store->MultiGet(3, keys, rows, found);
    ASSERT_TRUE(s.IsCorruption()) << s.ToString();
    const uint64_t page_offset = offset / page_bytes * page_bytes;
    EXPECT_NE(s.message().find(file), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("offset " + std::to_string(page_offset)), std::string::npos)
        << s.ToString();
    EXPECT_TRUE(store->Scan(3, [](Key, auto) { return Status::Ok(); }).IsCorruption());
    // Keys on intact pages still read correctly.
    b ^= 0x10;
    const int fd2 = ::open(file.c_str(), O_RDWR);
    ASSERT_EQ(::pwrite(fd2, &b, 1, offset), 1);
    ::close(fd2);
    ExpectContent(*store, 3, kRowBytes, model);
  }
}

TEST_F(NativeRowStoreTest, TornPageIsDetected) {
  std::vector<Key> keys;
  for (Key k = 0; k < 50; ++k) keys.push_back(k);
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(PutRows(*store, 3, kRowBytes, keys, 0, nullptr).ok());
    ASSERT_TRUE(store->Checkpoint({}).ok());
  }
  // The second half of page 0 reverts to zeros, as after a torn write.
  const int fd = ::open(DataFile().c_str(), O_RDWR);
  std::vector<char> zeros(2048, 0);
  ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), 2048), 2048);
  ::close(fd);
  auto store = Open();
  ASSERT_NE(store, nullptr);
  std::vector<std::byte> rows(keys.size() * kRowBytes);
  std::vector<uint8_t> found(keys.size());
  EXPECT_TRUE(store->MultiGet(3, keys, rows, found).IsCorruption());
}

TEST_F(NativeRowStoreTest, CorruptedManifestFailsOpen) {
  { ASSERT_NE(Open(), nullptr); }
  const std::string manifest = Options().dir + "/MANIFEST";
  const int fd = ::open(manifest.c_str(), O_RDWR);
  char b = 1;
  ASSERT_EQ(::pwrite(fd, &b, 1, 40), 1);
  ::close(fd);
  auto store = OpenRowStore(Options(), {{3, "emb", kRowBytes}});
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(store.status().IsCorruption()) << store.status().ToString();
  EXPECT_NE(store.status().message().find("MANIFEST"), std::string::npos);
}

TEST_F(NativeRowStoreTest, InjectedWriteErrorsLoseNothing) {
  // Leaf writes fail: puts and deletes write leaves directly (no write log;
  // native_write_log_test.cc covers failed log writes and merges).
  RowStoreOptions options = Options();
  options.write_log_fraction = 0;
  for (int error : {EIO, ENOSPC}) {
    Model model, checkpointed;
    auto opened = OpenRowStore(options, {{3, "emb", kRowBytes}});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    auto store = std::move(opened).value();
    std::vector<Key> keys;
    for (Key k = 0; k < 1000; ++k) keys.push_back(k * 11);
    ASSERT_TRUE(PutRows(*store, 3, kRowBytes, keys, 0, &model).ok());
    ASSERT_TRUE(store->Checkpoint({}).ok());
    checkpointed = model;
    io::FaultRule rule;
    rule.op = io::FaultOp::kWrite;
    rule.path_substring = ".pages";
    rule.error_number = error;
    ASSERT_TRUE(fault_env_.AddRule(rule).ok());
    Status s = PutRows(*store, 3, kRowBytes, keys, 1, nullptr);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    std::vector<Key> some;  // leaves keep rows, so they must be rewritten
    for (size_t i = 0; i < keys.size(); i += 2) some.push_back(keys[i]);
    EXPECT_TRUE(store->Delete(3, some).IsIOError());
    ExpectContent(*store, 3, kRowBytes, model);  // still the rows before the failed calls
    fault_env_.ClearRules();
    ASSERT_TRUE(PutRows(*store, 3, kRowBytes, {5}, 2, &model).ok());  // usable again
    ExpectContent(*store, 3, kRowBytes, model);
    store.reset();
    opened = OpenRowStore(options, {{3, "emb", kRowBytes}});
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store = std::move(opened).value();
    ExpectContent(*store, 3, kRowBytes, checkpointed);
    store.reset();
    std::error_code ignored;
    std::filesystem::remove_all(Options().dir, ignored);
  }
}

TEST_F(NativeRowStoreTest, InjectedReadErrorIsIOError) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(PutRows(*store, 3, kRowBytes, {1, 2}, 0, nullptr).ok());
  ASSERT_TRUE(store->Checkpoint({}).ok());  // the rows are in the leaves
  ExpectInjectedReadError(*store, ".pages", 1);
}

TEST_F(NativeRowStoreTest, SpaceAmplificationAfterGcAndIndexBytes) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(9);
  Model model;
  // Random inserts in small batches (leaves split to half full), overwrites
  // and deletes, with checkpoints that leave replaced pages behind.
  for (int round = 0; round < 60; ++round) {
    std::vector<Key> keys(500);
    for (Key& k : keys) k = rng();
    ASSERT_TRUE(PutRows(*store, 3, kRowBytes, keys, round, &model).ok());
    if (round % 10 == 9) {
      std::vector<Key> gone;
      for (const auto& [k, v] : model) {
        if (gone.size() < 2000 && k % 3 == 0) gone.push_back(k);
      }
      ASSERT_TRUE(store->Delete(3, gone).ok());
      for (Key k : gone) model.erase(k);
      ASSERT_TRUE(store->Checkpoint({}).ok());
    }
  }
  ASSERT_TRUE(store->Checkpoint({}).ok());
  RowStoreStats stats = store->Stats();
  EXPECT_EQ(stats.live_rows, model.size());
  EXPECT_LE(stats.space_amp(), 1.5) << "file " << stats.file_bytes << " live " << stats.live_bytes;
  EXPECT_GE(stats.space_amp(), 1.0);
  EXPECT_GT(stats.write_amp(), 1.0);
  EXPECT_LE(double(stats.index_bytes) / double(stats.live_rows), 8.0);
  ExpectContent(*store, 3, kRowBytes, model);
  store.reset();
  store = Open();  // the garbage-collected file is what the MANIFEST names
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, 3, kRowBytes, model);
  EXPECT_LE(store->Stats().space_amp(), 1.5);
}

}  // namespace
}  // namespace strata::storage
