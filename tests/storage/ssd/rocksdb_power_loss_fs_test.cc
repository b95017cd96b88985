// strata-test-labels: unit
// strata-test-timeout: 120
// RocksPowerLossFs: (1) the crash model on plain files through the
// rocksdb::Env API (unsynced appends lost, synced kept, creates, links and
// renames undone unless their directory was fsynced, deletions durable, other
// files untouched, the power cut); (2) the RocksDB row store under it: a power
// cut at points spread over a checkpoint, then the power loss, and reopening
// gives the last checkpoint that returned OK (or the one in flight, when the
// cut came after its pointer switch was durable), exactly.
#include "tests/storage/ssd/rocksdb_power_loss_fs.h"

#include <gtest/gtest.h>
#include <rocksdb/env.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::storage {
namespace {

using testing::Bytes;
using testing::Model;
using testing::RocksPowerLossFs;

class RocksPowerLossFsTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  std::string WriterFile(int t) const {
    std::string name = Path("writer");
    name += std::to_string(t);  // (not "a" + to_string: GCC 12 warns -Wrestrict)
    return name;
  }

  // Writes `synced` and syncs, then appends `unsynced`, and closes.
  void Write(const std::string& path, const std::string& synced, const std::string& unsynced = "") {
    std::unique_ptr<rocksdb::WritableFile> f;
    ASSERT_TRUE(env()->NewWritableFile(path, &f, rocksdb::EnvOptions()).ok()) << path;
    ASSERT_TRUE(f->Append(synced).ok());
    ASSERT_TRUE(f->Sync().ok());
    ASSERT_TRUE(f->Append(unsynced).ok());
    ASSERT_TRUE(f->Close().ok());
  }
  void SyncDir(const std::string& dir) {
    std::unique_ptr<rocksdb::Directory> d;
    ASSERT_TRUE(env()->NewDirectory(dir, &d).ok()) << dir;
    ASSERT_TRUE(d->Fsync().ok()) << dir;
  }
  // The content at `path`, read past the wrapper; "<missing>" when absent.
  static std::string Read(const std::string& path) {
    if (!std::filesystem::exists(path)) return "<missing>";
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void PowerLoss() {
    const Status s = fs_.DropUnsyncedData();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  rocksdb::Env* env() { return fs_.env(); }

  strata::testing::ScratchDir dir_;  // exists before the wrapper: durable
  RocksPowerLossFs fs_;
};

TEST_F(RocksPowerLossFsTest, UnsyncedAppendsAreLostSyncedKept) {
  Write(Path("a"), "synced", " lost");
  Write(Path("b"), "", "all lost");
  ASSERT_EQ(Read(Path("a")), "synced lost");
  SyncDir(dir_.path());
  PowerLoss();
  EXPECT_EQ(Read(Path("a")), "synced");
  EXPECT_EQ(Read(Path("b")), "");
  // Reopened for appending, the old content counts as synced.
  std::unique_ptr<rocksdb::WritableFile> f;
  ASSERT_TRUE(env()->ReopenWritableFile(Path("a"), &f, rocksdb::EnvOptions()).ok());
  ASSERT_TRUE(f->Append(" more").ok());
  ASSERT_TRUE(f->Close().ok());
  PowerLoss();
  EXPECT_EQ(Read(Path("a")), "synced");
}

TEST_F(RocksPowerLossFsTest, NewFileVanishesWithoutDirFsync) {
  Write(Path("kept"), "k");
  SyncDir(dir_.path());
  Write(Path("gone"), "g");
  ASSERT_TRUE(env()->CreateDir(Path("subdir")).ok());
  Write(Path("subdir/inner"), "i");
  SyncDir(Path("subdir"));  // its entry in dir_ is still not durable
  PowerLoss();
  EXPECT_EQ(Read(Path("kept")), "k");
  EXPECT_EQ(Read(Path("gone")), "<missing>");
  EXPECT_FALSE(std::filesystem::exists(Path("subdir")));
}

TEST_F(RocksPowerLossFsTest, RenameWithoutDirFsyncIsUndone) {
  Write(Path("target"), "old");
  SyncDir(dir_.path());
  // tmp created and renamed, no dir fsync: both undone, the old file back.
  Write(Path("tmp"), "new");
  ASSERT_TRUE(env()->RenameFile(Path("tmp"), Path("target")).ok());
  ASSERT_EQ(Read(Path("target")), "new");
  PowerLoss();
  EXPECT_EQ(Read(Path("target")), "old");
  EXPECT_EQ(Read(Path("tmp")), "<missing>");
  // tmp durable, the rename not: tmp comes back under its name.
  Write(Path("tmp"), "new", " unsynced");
  SyncDir(dir_.path());
  ASSERT_TRUE(env()->RenameFile(Path("tmp"), Path("target")).ok());
  PowerLoss();
  EXPECT_EQ(Read(Path("target")), "old");
  EXPECT_EQ(Read(Path("tmp")), "new");
  // The rename followed by a dir fsync sticks.
  ASSERT_TRUE(env()->RenameFile(Path("tmp"), Path("target")).ok());
  SyncDir(dir_.path());
  PowerLoss();
  EXPECT_EQ(Read(Path("target")), "new");
  EXPECT_EQ(Read(Path("tmp")), "<missing>");
}

TEST_F(RocksPowerLossFsTest, ReplacedFileNotWrittenThroughTheWrapperIsRestored) {
  std::ofstream(Path("CURRENT")) << "MANIFEST-000001\n";
  Write(Path("CURRENT.tmp"), "MANIFEST-000002\n");
  SyncDir(dir_.path());
  ASSERT_TRUE(env()->RenameFile(Path("CURRENT.tmp"), Path("CURRENT")).ok());
  PowerLoss();
  EXPECT_EQ(Read(Path("CURRENT")), "MANIFEST-000001\n");
  EXPECT_EQ(Read(Path("CURRENT.tmp")), "MANIFEST-000002\n");
}

TEST_F(RocksPowerLossFsTest, HardLinkWithoutDirFsyncVanishes) {
  std::filesystem::create_directory(Path("other"));
  Write(Path("file"), "data", " lost");
  SyncDir(dir_.path());
  ASSERT_TRUE(env()->LinkFile(Path("file"), Path("other/link")).ok());
  ASSERT_TRUE(env()->LinkFile(Path("file"), Path("other/kept")).ok());
  SyncDir(Path("other"));
  ASSERT_TRUE(env()->LinkFile(Path("file"), Path("other/gone")).ok());
  PowerLoss();
  EXPECT_EQ(Read(Path("file")), "data");
  EXPECT_EQ(Read(Path("other/link")), "data");  // the same file, truncated once
  EXPECT_EQ(Read(Path("other/kept")), "data");
  EXPECT_EQ(Read(Path("other/gone")), "<missing>");
}

// rocksdb::Checkpoint's sequence: a staging directory, files in it, renamed
// to its final name, then fsynced (through a handle opened before or after).
TEST_F(RocksPowerLossFsTest, DirectoryRenameMovesItsContent) {
  for (bool handle_before_rename : {false, true}) {
    for (bool parent_synced : {false, true}) {
      SCOPED_TRACE(std::to_string(handle_before_rename) + std::to_string(parent_synced));
      ASSERT_TRUE(env()->CreateDir(Path("ckpt.tmp")).ok());
      std::unique_ptr<rocksdb::Directory> d;
      if (handle_before_rename) {
        ASSERT_TRUE(env()->NewDirectory(Path("ckpt.tmp"), &d).ok());
      }
      Write(Path("ckpt.tmp/MANIFEST"), "manifest", " lost");
      ASSERT_TRUE(env()->RenameFile(Path("ckpt.tmp"), Path("ckpt")).ok());
      if (!handle_before_rename) {
        ASSERT_TRUE(env()->NewDirectory(Path("ckpt"), &d).ok());
      }
      ASSERT_TRUE(d->Fsync().ok());
      if (parent_synced) SyncDir(dir_.path());
      PowerLoss();
      EXPECT_FALSE(std::filesystem::exists(Path("ckpt.tmp")));
      EXPECT_EQ(Read(Path("ckpt/MANIFEST")), parent_synced ? "manifest" : "<missing>");
      std::filesystem::remove_all(Path("ckpt"));
    }
  }
}

TEST_F(RocksPowerLossFsTest, DeletionsAreDurableOtherFilesUntouched) {
  std::ofstream(Path("outside")) << "not through the wrapper";
  Write(Path("durable"), "d");
  SyncDir(dir_.path());
  ASSERT_TRUE(env()->DeleteFile(Path("durable")).ok());
  Write(Path("fleeting"), "f");
  ASSERT_TRUE(env()->DeleteFile(Path("fleeting")).ok());
  std::string read;
  ASSERT_TRUE(rocksdb::ReadFileToString(env(), Path("outside"), &read).ok());
  PowerLoss();
  EXPECT_EQ(Read(Path("durable")), "<missing>");
  EXPECT_EQ(Read(Path("fleeting")), "<missing>");
  EXPECT_EQ(Read(Path("outside")), "not through the wrapper");
}

TEST_F(RocksPowerLossFsTest, CutFailsEveryCallFromTheNthOn) {
  Write(Path("a"), "a");
  const uint64_t seen = fs_.ops_seen();
  EXPECT_EQ(seen, 5u);  // open, append, sync, append, close
  fs_.CutPowerAtOp(seen + 2);
  uint64_t size = 0;
  EXPECT_TRUE(env()->GetFileSize(Path("a"), &size).ok());  // op seen + 1
  rocksdb::Status s = env()->GetFileSize(Path("a"), &size);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.ToString().find("power cut"), std::string::npos) << s.ToString();
  std::unique_ptr<rocksdb::WritableFile> f;
  EXPECT_TRUE(env()->NewWritableFile(Path("b"), &f, rocksdb::EnvOptions()).IsIOError());
  EXPECT_TRUE(env()->RenameFile(Path("a"), Path("c")).IsIOError());
  EXPECT_TRUE(env()->DeleteFile(Path("a")).IsIOError());
  EXPECT_TRUE(env()->FileExists(Path("a")).ok());  // counted, never refused
  EXPECT_EQ(fs_.ops_seen(), seen + 6);
  EXPECT_EQ(Read(Path("a")), "a");
  EXPECT_EQ(Read(Path("b")), "<missing>");
  PowerLoss();                                             // lifts the cut
  EXPECT_TRUE(env()->FileExists(Path("a")).IsNotFound());  // never dir-synced
  fs_.CutPowerAtOp(0);
  Write(Path("a"), "a");
}

TEST_F(RocksPowerLossFsTest, ConcurrentWritersKeepTheirSyncedPrefixes) {
  constexpr int kThreads = 4;
  std::vector<std::string> synced(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      const std::string path = WriterFile(t);
      std::unique_ptr<rocksdb::WritableFile> f;
      ASSERT_TRUE(env()->NewWritableFile(path, &f, rocksdb::EnvOptions()).ok());
      SyncDir(dir_.path());
      std::string written;
      for (int i = 0; i < 200; ++i) {
        const std::string chunk(1 + rng() % 100, static_cast<char>('a' + (i + t) % 26));
        ASSERT_TRUE(f->Append(chunk).ok());
        written += chunk;
        if (rng() % 4 == 0) {
          ASSERT_TRUE(f->Sync().ok());
          synced[t] = written;
        }
      }
      ASSERT_TRUE(f->Close().ok());
    });
  }
  for (std::thread& t : threads) t.join();
  PowerLoss();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(Read(WriterFile(t)), synced[t]);
}

// The RocksDB row store on the wrapper. Its directory exists before (made
// past the wrapper, so durable), except in FreshStoreDirectorySurvivesPowerLoss.
class RocksPowerLossRowStoreTest : public ::testing::Test {
 protected:
  struct Content {
    Model emb, opt;
  };
  static constexpr uint32_t kEmbBytes = 64;
  static constexpr uint32_t kOptBytes = 16;

  RowStoreOptions Options() {
    RowStoreOptions o;
    o.backend = SsdBackend::kRocksDb;
    o.dir = dir_.path() + "/store";
    o.rocksdb_env = fs_.env();
    o.rocksdb_block_cache_bytes = 1 << 20;
    o.rocksdb_write_buffer_bytes = 1 << 20;
    return o;
  }
  Result<std::unique_ptr<RowStore>> Open() {
    return OpenRowStore(Options(), {{1, "emb", kEmbBytes}, {2, "opt", kOptBytes}});
  }
  // Puts and deletes rows of both tables, as the model does.
  static void Mutate(RowStore& store, std::mt19937_64& rng, uint64_t version, Content* c) {
    std::vector<Key> put(200), opt_put(100), del(20);
    for (Key& k : put) k = rng() % 2000;
    for (Key& k : opt_put) k = rng() % 2000;
    for (Key& k : del) k = rng() % 2000;
    ASSERT_TRUE(testing::PutRows(store, 1, kEmbBytes, put, version, &c->emb).ok());
    ASSERT_TRUE(testing::PutRows(store, 2, kOptBytes, opt_put, version, &c->opt).ok());
    ASSERT_TRUE(store.Delete(1, del).ok());
    ASSERT_TRUE(store.Delete(2, std::span<const Key>(del).first(10)).ok());
    for (Key k : del) c->emb.erase(k);
    for (size_t i = 0; i < 10; ++i) c->opt.erase(del[i]);
  }
  static void ExpectContent(RowStore& store, const Content& c) {
    testing::ExpectContent(store, 1, kEmbBytes, c.emb);
    testing::ExpectContent(store, 2, kOptBytes, c.opt);
  }
  static std::string Meta(const RowStore& store) {
    const std::vector<std::byte> meta = store.CheckpointMeta();
    return std::string(reinterpret_cast<const char*>(meta.data()), meta.size());
  }
  // The power loss: cut now (if the cut was not reached yet), close, drop.
  void PowerLoss(std::unique_ptr<RowStore>* store) {
    fs_.CutPowerAtOp(std::max<uint64_t>(fs_.ops_seen(), 1));
    store->reset();
    const Status s = fs_.DropUnsyncedData();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  strata::testing::ScratchDir dir_;
  RocksPowerLossFs fs_;  // outlives the stores of a test
};

TEST_F(RocksPowerLossRowStoreTest, PowerCutDuringCheckpointGivesACheckpointExactly) {
  std::filesystem::create_directories(Options().dir);
  std::mt19937_64 rng(11);
  auto opened = Open();
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<RowStore> store = std::move(opened).value();
  Content live;
  constexpr int kCuts = 30;
  int old_kept = 0, in_flight_kept = 0, completed = 0;
  for (int i = 0; i < kCuts; ++i) {
    // One checkpoint that returns OK (counting its calls), more writes, then
    // one cut at a point spread over the next checkpoint's calls (the last
    // few past its end).
    const std::string ok_meta = "ok " + std::to_string(i);
    const std::string cut_meta = "cut " + std::to_string(i);
    Mutate(*store, rng, 2 * i + 1, &live);
    const uint64_t ok_start = fs_.ops_seen();
    ASSERT_TRUE(store->Checkpoint(Bytes(ok_meta)).ok());
    const uint64_t checkpoint_ops = fs_.ops_seen() - ok_start;
    const Content at_ok = live;
    Mutate(*store, rng, 2 * i + 2, &live);
    const Content at_cut = live;
    const uint64_t offset = 1 + i * (checkpoint_ops + checkpoint_ops / 4) / kCuts;
    fs_.CutPowerAtOp(fs_.ops_seen() + offset);
    const Status s = store->Checkpoint(Bytes(cut_meta));
    SCOPED_TRACE("cut at op " + std::to_string(offset) + " of " + std::to_string(checkpoint_ops) +
                 ": " + s.ToString());
    if (s.ok()) {  // lost with the power (or refused: the cut may stop RocksDB's writes)
      (void)testing::PutRows(*store, 1, kEmbBytes, {1, 2, 3}, 2 * i + 3, nullptr);
    }
    PowerLoss(&store);

    opened = Open();
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store = std::move(opened).value();
    const std::string meta = Meta(*store);
    if (s.ok()) {
      ASSERT_EQ(meta, cut_meta);
      ++completed;
    } else {  // the one in flight only when its pointer switch was durable
      ASSERT_TRUE(meta == ok_meta || meta == cut_meta) << meta;
      ++(meta == ok_meta ? old_kept : in_flight_kept);
    }
    live = meta == ok_meta ? at_ok : at_cut;
    ExpectContent(*store, live);
  }
  EXPECT_GT(old_kept, 0);
  EXPECT_GT(completed, 0);
  std::printf("%d cuts: old checkpoint %d, failed but in flight kept %d, completed %d\n", kCuts,
              old_kept, in_flight_kept, completed);
}

TEST_F(RocksPowerLossRowStoreTest, PowerCutDuringRecoveryGivesTheCheckpoint) {
  std::filesystem::create_directories(Options().dir);
  std::mt19937_64 rng(12);
  Content checkpointed;
  {
    auto store = Open();
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Mutate(**store, rng, 0, &checkpointed);
    ASSERT_TRUE((*store)->Checkpoint(Bytes("c")).ok());
  }
  // How many calls a reopen (checkpoint check, live/ rebuilt, DB opened) makes.
  uint64_t open_ops = fs_.ops_seen();
  ASSERT_TRUE(Open().ok());
  open_ops = fs_.ops_seen() - open_ops;
  constexpr int kCuts = 10;
  for (int i = 0; i < kCuts; ++i) {
    // The cut (then the power loss) during a reopen, the last one past its end.
    const uint64_t offset = 1 + i * (open_ops + open_ops / 5) / kCuts;
    SCOPED_TRACE("cut at op " + std::to_string(offset) + " of " + std::to_string(open_ops));
    fs_.CutPowerAtOp(fs_.ops_seen() + offset);
    auto cut = Open();
    std::unique_ptr<RowStore> store = cut.ok() ? std::move(cut).value() : nullptr;
    if (store != nullptr) {  // lost with the power (or refused)
      (void)testing::PutRows(*store, 1, kEmbBytes, {1, 2, 3}, i + 1, nullptr);
    }
    PowerLoss(&store);
    auto reopened = Open();
    ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
    EXPECT_EQ(Meta(**reopened), "c");
    ExpectContent(**reopened, checkpointed);
  }
}

// OpenRowStore creates a missing store directory and fsyncs its parent, so a
// power loss cannot take the whole store, with its checkpoints, away.
TEST_F(RocksPowerLossRowStoreTest, FreshStoreDirectorySurvivesPowerLoss) {
  std::mt19937_64 rng(13);
  Content checkpointed;
  auto store = Open();  // creates dir_/store through the wrapper
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Mutate(**store, rng, 0, &checkpointed);
  ASSERT_TRUE((*store)->Checkpoint(Bytes("c")).ok());
  std::unique_ptr<RowStore> owned = std::move(store).value();
  PowerLoss(&owned);
  auto reopened = Open();
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ(Meta(**reopened), "c");
  ExpectContent(**reopened, checkpointed);
}

}  // namespace
}  // namespace strata::storage
