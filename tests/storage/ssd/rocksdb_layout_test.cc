// strata-test-labels: unit
// The RocksDB backend's files under dir/ (storage/ssd/rocksdb_layout.cc): a
// malformed CHECKPOINT pointer, a missing one beside checkpoint data, or one
// naming a missing ckpt-<n>/ is refused with Corruption naming the file, and
// the refused open changes nothing (the data is still there once the pointer
// is repaired); an interrupted creation is created again; a missing
// directory and its parents are created, each new entry fsynced in its
// parent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/rocksdb_test_util.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::storage {
namespace {

namespace fs = std::filesystem;
using testing::FaultFs;
using testing::Model;
using testing::PutRows;

constexpr uint32_t kRowBytes = 64;
const std::vector<TableSpec> kTables = {{1, "emb", kRowBytes}};

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
void WriteAll(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Every entry under `dir` with its content ("<dir>" for directories).
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    out[rel] = e.is_directory() ? "<dir>" : ReadAll(e.path());
  }
  return out;
}

class RocksDbLayoutTest : public ::testing::Test {
 protected:
  RowStoreOptions Options() const { return testing::RocksDbTestOptions(dir_.path() + "/store"); }
  std::string Pointer() const { return Options().dir + "/CHECKPOINT"; }

  // A store holding rows in its checkpoint ckpt-2 (ckpt-1 is the empty one
  // written at creation); closed.
  void MakeStore() {
    auto store = OpenRowStore(Options(), kTables);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    std::vector<Key> keys;
    for (Key k = 0; k < 300; ++k) keys.push_back(k * 11);
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, keys, 0, &model_).ok());
    ASSERT_TRUE((*store)->Checkpoint(testing::Bytes("two")).ok());
    ASSERT_EQ(ReadAll(Pointer()), "ckpt-2\n");
  }

  // Open fails with Corruption whose message holds every one of `names`, and
  // the directory is exactly as before.
  void ExpectRefused(const std::vector<std::string>& names) {
    const auto before = Snapshot(Options().dir);
    auto store = OpenRowStore(Options(), kTables);
    ASSERT_FALSE(store.ok());
    EXPECT_TRUE(store.status().IsCorruption()) << store.status().ToString();
    for (const std::string& name : names) {
      EXPECT_NE(store.status().message().find(name), std::string::npos)
          << store.status().ToString() << " does not name " << name;
    }
    EXPECT_EQ(Snapshot(Options().dir), before) << "a refused open changed the directory";
  }

  // With the pointer repaired, the store opens to its checkpoint.
  void ExpectRepairable() {
    WriteAll(Pointer(), "ckpt-2\n");
    auto store = OpenRowStore(Options(), kTables);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->CheckpointMeta(), testing::Bytes("two"));
    testing::ExpectContent(**store, 1, kRowBytes, model_);
  }

  strata::testing::ScratchDir dir_;
  Model model_;
};

TEST_F(RocksDbLayoutTest, MalformedPointerIsRefusedAndChangesNothing) {
  MakeStore();
  const std::vector<std::string> bad = {"ckpt-x\n",
                                        "ckpt-\n",
                                        "ckpt-99999999999999999999999999\n",
                                        "ckpt-0\n",
                                        "ckpt-2",
                                        "ckpt-2\nckpt-3\n",
                                        "ckpt--2\n",
                                        "ckpt-+2\n",
                                        "ckpt-02\n",
                                        "ckpt- 2\n",
                                        "\n",
                                        "",
                                        "CKPT-2\n",
                                        "ckpt-2 \n",
                                        "ckpt-18446744073709551616\n",
                                        "ckpt-2\0\n",
                                        std::string(4096, 'c')};
  for (const std::string& text : bad) {
    SCOPED_TRACE("CHECKPOINT holding '" + text.substr(0, 40) + "'");
    WriteAll(Pointer(), text);
    // The message names the file and shows what it holds.
    ExpectRefused(
        {Pointer(), text.substr(0, text.find_first_of(std::string("\n\0", 2))).substr(0, 16)});
  }
  ExpectRepairable();
}

TEST_F(RocksDbLayoutTest, MissingPointerBesideCheckpointsIsRefused) {
  MakeStore();
  fs::remove(Pointer());
  ExpectRefused({Pointer(), "ckpt-2", "live"});
  ExpectRepairable();
}

TEST_F(RocksDbLayoutTest, MissingPointerBesideLiveOnlyIsRefused) {
  fs::create_directories(Options().dir + "/live");
  WriteAll(Options().dir + "/live/000004.sst", "rows");
  ExpectRefused({Pointer(), "live"});
}

TEST_F(RocksDbLayoutTest, PointerToMissingCheckpointIsRefused) {
  MakeStore();
  WriteAll(Pointer(), "ckpt-7\n");
  ExpectRefused({Pointer(), "ckpt-7"});
  ExpectRepairable();
}

TEST_F(RocksDbLayoutTest, InterruptedCreationIsCreatedAgain) {
  auto fault = std::make_shared<FaultFs>(rocksdb::FileSystem::Default());
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fault);
  RowStoreOptions o = Options();
  o.rocksdb_env = env.get();
  fault->fail_pointer_renames = true;  // the creation dies before its pointer
  ASSERT_FALSE(OpenRowStore(o, kTables).ok());
  ASSERT_FALSE(fs::exists(Pointer()));
  ASSERT_TRUE(fs::exists(o.dir + "/live"));
  fault->fail_pointer_renames = false;
  Model model;
  {
    auto store = OpenRowStore(o, kTables);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    testing::ExpectContent(**store, 1, kRowBytes, {});
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, {1, 2, 3}, 0, &model).ok());
    ASSERT_TRUE((*store)->Checkpoint({}).ok());
  }
  EXPECT_FALSE(fs::exists(o.dir + "/CREATING"));
  auto store = OpenRowStore(o, kTables);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  testing::ExpectContent(**store, 1, kRowBytes, model);
}

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
