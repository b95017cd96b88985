// strata-test-labels: unit
// The RocksDB backend's checkpoint sequence (storage/ssd/rocksdb_checkpoint.cc):
// after a failure at or past the rename of CHECKPOINT, both the old and the
// new checkpoint stay until a later checkpoint succeeds (a power loss may
// leave either pointer), and each reopens to its own rows; an error deleting
// obsolete checkpoints after a durable switch is no failure: counted, logged
// once, retried at the next checkpoint or open.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/rocksdb_test_util.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::storage {
namespace {

namespace fs = std::filesystem;
using testing::Bytes;
using testing::FaultFs;
using testing::Model;
using testing::PutRows;

constexpr uint32_t kRowBytes = 64;
const std::vector<TableSpec> kTables = {{1, "emb", kRowBytes}};

std::set<std::string> CheckpointDirs(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().starts_with("ckpt-")) out.insert(e.path().filename());
  }
  return out;
}
std::string ReadPointer(const std::string& dir) {
  std::ifstream in(dir + "/CHECKPOINT");
  std::string line;
  std::getline(in, line);
  return line;
}
std::vector<Key> Keys(Key base) {
  std::vector<Key> keys;
  for (Key k = 0; k < 200; ++k) keys.push_back(base + k * 3);
  return keys;
}

class RocksDbCheckpointTest : public ::testing::Test {
 protected:
  RocksDbCheckpointTest()
      : fault_(std::make_shared<FaultFs>(rocksdb::FileSystem::Default())),
        env_(rocksdb::NewCompositeEnv(fault_)) {}

  RowStoreOptions Options(const std::string& name = "store") const {
    return testing::RocksDbTestOptions(dir_.path() + "/" + name, env_.get());
  }
  // Opens `name` and expects the rows of `model` and `meta`.
  void ExpectReopens(const std::string& name, const Model& model, const std::string& meta) {
    auto store = OpenRowStore(Options(name), kTables);
    ASSERT_TRUE(store.ok()) << name << ": " << store.status().ToString();
    EXPECT_EQ((*store)->CheckpointMeta(), Bytes(meta)) << name;
    testing::ExpectContent(**store, 1, kRowBytes, model);
  }

  strata::testing::ScratchDir dir_;
  std::shared_ptr<FaultFs> fault_;
  std::unique_ptr<rocksdb::Env> env_;
};

TEST_F(RocksDbCheckpointTest, FailureAfterPointerRenameKeepsBothCheckpoints) {
  const std::string dir = Options().dir;
  Model a, b, d;
  auto store = OpenRowStore(Options(), kTables);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(PutRows(**store, 1, kRowBytes, Keys(0), 0, &a).ok());
  ASSERT_TRUE((*store)->Checkpoint(Bytes("A")).ok());  // ckpt-2
  b = a;
  ASSERT_TRUE(PutRows(**store, 1, kRowBytes, Keys(1), 1, &b).ok());

  // The rename of CHECKPOINT happens, the directory fsync after it fails: on
  // disk the pointer names ckpt-3, but a power loss may bring back ckpt-2.
  fault_->fail_dir_syncs_after_pointer_rename = true;
  Status s = (*store)->Checkpoint(Bytes("B"));
  fault_->fail_dir_syncs_after_pointer_rename = false;
  ASSERT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_EQ(ReadPointer(dir), "ckpt-3");
  EXPECT_EQ(CheckpointDirs(dir), (std::set<std::string>{"ckpt-2", "ckpt-3"}));

  // A later attempt that fails before its own rename deletes neither.
  d = b;
  ASSERT_TRUE(PutRows(**store, 1, kRowBytes, Keys(2), 2, &d).ok());
  fault_->fail_checkpoint_creates = true;
  s = (*store)->Checkpoint(Bytes("C"));
  fault_->fail_checkpoint_creates = false;
  ASSERT_FALSE(s.ok());
  std::set<std::string> dirs = CheckpointDirs(dir);
  EXPECT_TRUE(dirs.count("ckpt-2") && dirs.count("ckpt-3")) << "a checkpoint a pointer may name "
                                                               "was deleted";

  // Power loss now: either pointer may be what survives; each gives its rows.
  for (const char* name : {"lost_rename", "kept_rename"}) {
    fs::create_directories(dir_.path() + "/" + name);
    for (const char* c : {"ckpt-2", "ckpt-3", "CHECKPOINT"}) {
      fs::copy(dir + "/" + c, dir_.path() + "/" + name + "/" + c, fs::copy_options::recursive);
    }
  }
  std::ofstream(dir_.path() + "/lost_rename/CHECKPOINT", std::ios::trunc) << "ckpt-2\n";
  ExpectReopens("lost_rename", a, "A");
  ExpectReopens("kept_rename", b, "B");

  // A checkpoint that succeeds ends it: only its own directory remains.
  ASSERT_TRUE((*store)->Checkpoint(Bytes("D")).ok());
  EXPECT_EQ(CheckpointDirs(dir).size(), 1u);
  EXPECT_EQ(CheckpointDirs(dir).count(ReadPointer(dir)), 1u);
  EXPECT_EQ((*store)->Stats().cleanup_errors, 0u);
  store->reset();
  ExpectReopens("store", d, "D");
}

TEST_F(RocksDbCheckpointTest, FailedPointerRenameKeepsBothCheckpoints) {
  const std::string dir = Options().dir;
  Model a;
  auto store = OpenRowStore(Options(), kTables);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE(PutRows(**store, 1, kRowBytes, Keys(0), 0, &a).ok());
  ASSERT_TRUE((*store)->Checkpoint(Bytes("A")).ok());  // ckpt-2
  ASSERT_TRUE(PutRows(**store, 1, kRowBytes, Keys(1), 1, nullptr).ok());
  fault_->fail_pointer_renames = true;  // may or may not have happened
  ASSERT_FALSE((*store)->Checkpoint(Bytes("B")).ok());
  fault_->fail_pointer_renames = false;
  EXPECT_EQ(ReadPointer(dir), "ckpt-2");
  EXPECT_EQ(CheckpointDirs(dir), (std::set<std::string>{"ckpt-2", "ckpt-3"}));
  EXPECT_EQ((*store)->CheckpointMeta(), Bytes("A"));
  store->reset();
  ExpectReopens("store", a, "A");
  EXPECT_EQ(CheckpointDirs(dir),
            std::set<std::string>{"ckpt-2"});  // removed behind a durable pointer
}

TEST_F(RocksDbCheckpointTest, CleanupErrorAfterSwitchIsCountedNotFailed) {
  const std::string dir = Options().dir;
  Model model;
  {
    auto store = OpenRowStore(Options(), kTables);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, Keys(0), 0, &model).ok());
    fault_->fail_checkpoint_deletes = true;
    ::testing::internal::CaptureStderr();
    // Both switches are durable: success, the old directories stay.
    ASSERT_TRUE((*store)->Checkpoint(Bytes("two")).ok());
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, Keys(1), 1, &model).ok());
    ASSERT_TRUE((*store)->Checkpoint(Bytes("three")).ok());
    const std::string logged = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ((*store)->CheckpointMeta(), Bytes("three"));
    EXPECT_EQ(ReadPointer(dir), "ckpt-3");
    EXPECT_EQ(CheckpointDirs(dir), (std::set<std::string>{"ckpt-1", "ckpt-2", "ckpt-3"}));
    EXPECT_GE((*store)->Stats().cleanup_errors, 2u);
    // Logged once, naming the store.
    const size_t first = logged.find("obsolete checkpoint");
    ASSERT_NE(first, std::string::npos) << logged;
    EXPECT_EQ(logged.find("obsolete checkpoint", first + 1), std::string::npos) << logged;
    EXPECT_NE(logged.find(dir), std::string::npos) << logged;
  }
  // Retried at open, once deletions work again.
  fault_->fail_checkpoint_deletes = false;
  ExpectReopens("store", model, "three");
  EXPECT_EQ(CheckpointDirs(dir), std::set<std::string>{"ckpt-3"});

  // And at the next checkpoint.
  auto store = OpenRowStore(Options(), kTables);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  fault_->fail_checkpoint_deletes = true;
  ASSERT_TRUE((*store)->Checkpoint(Bytes("four")).ok());
  fault_->fail_checkpoint_deletes = false;
  EXPECT_EQ(CheckpointDirs(dir), (std::set<std::string>{"ckpt-3", "ckpt-4"}));
  EXPECT_EQ((*store)->Stats().cleanup_errors, 1u);
  ASSERT_TRUE((*store)->Checkpoint(Bytes("five")).ok());
  EXPECT_EQ(CheckpointDirs(dir), std::set<std::string>{"ckpt-5"});
}

}  // namespace
}  // namespace strata::storage
