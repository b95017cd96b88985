// strata-test-labels: unit
// The RocksDB backend's files under dir/ (storage/rocksdb_layout.cc): a
// missing directory and its parents are created, each new entry fsynced in
// its parent.
#include <gtest/gtest.h>

#include <filesystem>

#include "storage/row_store_factory.h"
#include "tests/storage/rocksdb_test_util.h"
#include "tests/storage/row_store_test_util.h"

namespace strata::storage {
namespace {

namespace fs = std::filesystem;
using testing::FaultFs;
using testing::Model;
using testing::PutRows;

constexpr uint32_t kRowBytes = 64;
const std::vector<TableSpec> kTables = {{1, "emb", kRowBytes}};

class RocksDbLayoutTest : public ::testing::Test {
 protected:
  RowStoreOptions Options() const { return testing::RocksDbTestOptions(dir_.path() + "/store"); }

  testing::ScratchDir dir_;
};

TEST_F(RocksDbLayoutTest, CreatesMissingParentsAndSyncsEachEntry) {
  auto fault = std::make_shared<FaultFs>(rocksdb::FileSystem::Default());
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fault);
  RowStoreOptions o = Options();
  o.rocksdb_env = env.get();
  o.dir = dir_.path() + "/a/b/c";
  Model model;
  {
    auto store = OpenRowStore(o, kTables);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, {5, 6, 7}, 0, &model).ok());
    ASSERT_TRUE((*store)->Checkpoint(testing::Bytes("one")).ok());
  }
  // Each created level's entry was made durable in its parent.
  for (const std::string& parent : {dir_.path(), dir_.path() + "/a", dir_.path() + "/a/b"}) {
    EXPECT_TRUE(fault->DirSynced(parent)) << parent << " was not fsynced";
  }
  auto store = OpenRowStore(o, kTables);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->CheckpointMeta(), testing::Bytes("one"));
  testing::ExpectContent(**store, 1, kRowBytes, model);
}

TEST_F(RocksDbLayoutTest, RelativeNestedDirectoryIsCreated) {
  RowStoreOptions o = Options();
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_.path());
  o.dir = "new/sub";
  {
    auto store = OpenRowStore(o, kTables);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
  }
  fs::current_path(cwd);
  EXPECT_TRUE(fs::exists(dir_.path() + "/new/sub/CHECKPOINT"));
}

}  // namespace
}  // namespace strata::storage
