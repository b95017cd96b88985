// strata-test-labels: unit
// Native backend durability: what a failure in or after a checkpoint leaves.
// A failed switch of the MANIFEST keeps the pages of both MANIFESTs; a failed
// data fsync stops the store; a lost MANIFEST never turns data files into a
// new store; cleanup errors after a durable switch do not fail it. Each test
// ends in a crash (process death or power loss) and a reopen that must give a
// checkpoint, exactly.
#include <gtest/gtest.h>

#include <filesystem>

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

constexpr uint32_t kRowBytes = 64;
constexpr TableId kTable = 3;

class NativeDurabilityTest : public testing::NativeRowStoreFixture {
 protected:
  NativeDurabilityTest() : NativeRowStoreFixture(kTable, kRowBytes) {}
  std::vector<std::string> DataFiles() {
    std::vector<std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(Options().dir)) {
      const std::string name = entry.path().filename().string();
      if (ssd::IsDataFileName(name) || ssd::IsLogDataFileName(name)) {
        files.push_back(entry.path().string());
      }
    }
    return files;
  }
  void AddRule(io::FaultRule rule) { ASSERT_TRUE(fault_env_.AddRule(rule).ok()); }
  // Keys at version 1, checkpoint "v1"; version 2, checkpoint "v2" whose
  // directory fsync fails (the switch in doubt). Returns that checkpoint's
  // status; `v1`/`v2` (when given) get the models of the two versions.
  Status CheckpointInDoubt(RowStore& store, const std::vector<Key>& keys, Model* v1, Model* v2) {
    STRATA_RETURN_IF_ERROR(PutRows(store, kTable, kRowBytes, keys, 1, v1));
    STRATA_RETURN_IF_ERROR(store.Checkpoint(Bytes("v1")));
    STRATA_RETURN_IF_ERROR(PutRows(store, kTable, kRowBytes, keys, 2, v2));
    STRATA_RETURN_IF_ERROR(fault_env_.AddRule({.op = io::FaultOp::kSyncDir, .times_max = 1}));
    Status s = store.Checkpoint(Bytes("v2"));
    fault_env_.ClearRules();
    return s;
  }
  // Versions 3 to 6 of `keys`, each over the last, with no checkpoint.
  static Status OverwriteWithoutCheckpoint(RowStore& store, const std::vector<Key>& keys) {
    for (uint64_t version = 3; version <= 6; ++version) {
      STRATA_RETURN_IF_ERROR(PutRows(store, kTable, kRowBytes, keys, version, nullptr));
    }
    return Status::Ok();
  }
  // Reopened, the store holds exactly the checkpoint `meta`, whose content is `model`.
  void ExpectReopensAt(const std::string& meta, const Model& model) {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->CheckpointMeta(), Bytes(meta));
    ExpectContent(*store, kTable, kRowBytes, model);
  }
};

// The tests below hold for both native formats (a failed switch, a failed
// data fsync, a lost MANIFEST and an interrupted creation mean the same in
// both); their data files differ.
// Format 2 runs with either DRAM index (the exact one resolves puts and
// deletes without reading).
struct FormatParam {
  uint32_t format;
  SsdIndex index;
};
class NativeDurabilityFormatTest : public NativeDurabilityTest,
                                   public ::testing::WithParamInterface<FormatParam> {
 protected:
  NativeDurabilityFormatTest() {
    format_ = GetParam().format;
    ssd_index_ = GetParam().index;
  }
  const char* DataSuffix() const { return format_ == 1 ? ".pages" : ".log"; }
};
INSTANTIATE_TEST_SUITE_P(, NativeDurabilityFormatTest,
                         ::testing::Values(FormatParam{1, SsdIndex::kCompact},
                                           FormatParam{2, SsdIndex::kCompact},
                                           FormatParam{2, SsdIndex::kExact},
                                           FormatParam{2, SsdIndex::kRanges}),
                         [](const ::testing::TestParamInfo<FormatParam>& info) {
                           return "V" + std::to_string(info.param.format) +
                                  (info.param.index == SsdIndex::kExact    ? "Exact"
                                   : info.param.index == SsdIndex::kRanges ? "Ranges"
                                                                           : "");
                         });

// The reproduction: keys 1-3 at version 1, checkpoint; version 2,
// checkpoint whose directory fsync fails; four more rounds of overwrites; the
// process dies. The renamed MANIFEST is visible, so reopening must give
// version 2 exactly: its pages must not have been reused by the overwrites.
TEST_P(NativeDurabilityFormatTest, FailedDirectorySyncAfterRenameKeepsItsPages) {
  const std::vector<Key> keys = {1, 2, 3};
  Model v2;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    Status s = CheckpointInDoubt(*store, keys, nullptr, &v2);
    ASSERT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_NE(s.message().find("in doubt"), std::string::npos) << s.ToString();
    ASSERT_TRUE(OverwriteWithoutCheckpoint(*store, keys).ok());
  }  // the process dies: nothing more is written, the rename stays
  ExpectReopensAt("v2", v2);
}

// The same, but the process dies at once and the store is reopened, written
// and then loses power: the reopen must make the MANIFEST it read durable
// before it frees the old MANIFEST's pages for the new writes.
TEST_P(NativeDurabilityFormatTest, ReopenAfterSwitchInDoubtMakesItDurableBeforeReusingPages) {
  const std::vector<Key> keys = {1, 2, 3};
  Model v2;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    const Status s = CheckpointInDoubt(*store, keys, nullptr, &v2);
    ASSERT_NE(s.message().find("in doubt"), std::string::npos) << s.ToString();
  }  // the process dies
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->CheckpointMeta(), Bytes("v2"));
    ASSERT_TRUE(OverwriteWithoutCheckpoint(*store, keys).ok());
    ASSERT_TRUE(store->Sync().ok());
    ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());  // power loss before a checkpoint
  }
  ExpectReopensAt("v2", v2);
}

// The same, then a power loss: the rename was never made durable, so the old
// MANIFEST comes back, and its pages must be whole too.
TEST_P(NativeDurabilityFormatTest, FailedDirectorySyncThenPowerLossGivesOldCheckpoint) {
  const std::vector<Key> keys = {1, 2, 3};
  Model v1;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    const Status s = CheckpointInDoubt(*store, keys, &v1, nullptr);
    ASSERT_NE(s.message().find("in doubt"), std::string::npos) << s.ToString();
    ASSERT_TRUE(OverwriteWithoutCheckpoint(*store, keys).ok());
    ASSERT_TRUE(store->Sync().ok());
    ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
  }
  ExpectReopensAt("v1", v1);
}

// After a switch in doubt, the next successful checkpoint is the store's
// state, and the kept pages become reusable again (the file does not grow
// without bound).
TEST_P(NativeDurabilityFormatTest, CheckpointAfterSwitchInDoubtSucceedsAndFreesPages) {
  std::vector<Key> keys;
  for (Key k = 0; k < 200; ++k) keys.push_back(k * 7919);
  Model model;
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 1, &model).ok());
  ASSERT_TRUE(store->Checkpoint(Bytes("1")).ok());
  const uint64_t file_bytes = store->Stats().file_bytes;
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 2, &model).ok());
  AddRule({.op = io::FaultOp::kRename, .times_max = 1});
  ASSERT_FALSE(store->Checkpoint(Bytes("2")).ok());
  fault_env_.ClearRules();
  for (uint64_t version = 3; version <= 6; ++version) {
    ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, version, &model).ok());
    ASSERT_TRUE(store->Checkpoint(Bytes(std::to_string(version))).ok());
  }
  // Format 2 seals its head segment at each checkpoint: a few more segments
  // live until the cleaner (paced by space amplification) reclaims them.
  EXPECT_LE(store->Stats().file_bytes, (format_ == 1 ? 3 : 8) * file_bytes);
  store.reset();
  ExpectReopensAt("6", model);
}

// A failed fsync of a data file may have lost the pages written since the
// last checkpoint (the kernel reports it once and drops them): the store
// refuses every later call rather than checkpoint or return those pages, and
// reopening gives the last checkpoint.
TEST_P(NativeDurabilityFormatTest, FailedDataSyncStopsTheStore) {
  const std::vector<Key> keys = {10, 20, 30, 40};
  Model v1;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 1, &v1).ok());
    ASSERT_TRUE(store->Checkpoint(Bytes("v1")).ok());
    ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 2, nullptr).ok());
    AddRule({.op = io::FaultOp::kSync,
             .path_substring = DataSuffix(),
             .times_max = 1,
             .sync_error_drops_writes = true});
    Status s = store->Checkpoint(Bytes("v2"));
    ASSERT_TRUE(s.IsIOError()) << s.ToString();
    fault_env_.ClearRules();
    // Sticky: the retry fails too, and so does every read and write.
    s = store->Checkpoint(Bytes("v2"));
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_NE(s.message().find("reopen"), std::string::npos) << s.ToString();
    std::vector<std::byte> rows(keys.size() * kRowBytes);
    std::vector<uint8_t> found(keys.size());
    EXPECT_TRUE(store->MultiGet(kTable, keys, rows, found).IsIOError());
    EXPECT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 3, nullptr).IsIOError());
    EXPECT_TRUE(store->Sync().IsIOError());
  }
  ExpectReopensAt("v1", v1);
}

TEST_P(NativeDurabilityFormatTest, MissingManifestWithDataIsRefusedAndNothingChanges) {
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, {1, 2, 3}, 1, nullptr).ok());
    ASSERT_TRUE(store->Checkpoint({}).ok());
  }
  std::filesystem::remove(Options().dir + "/" + ssd::kManifestName);
  const std::vector<std::string> files = DataFiles();
  ASSERT_EQ(files.size(), 1u);
  const uint64_t size = std::filesystem::file_size(files[0]);
  ASSERT_GT(size, 0u);
  auto store = OpenRowStore(Options(), {{kTable, "emb", kRowBytes}});
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(store.status().IsCorruption()) << store.status().ToString();
  EXPECT_NE(store.status().message().find(files[0]), std::string::npos)
      << store.status().ToString();
  EXPECT_NE(store.status().message().find("MANIFEST"), std::string::npos);
  EXPECT_EQ(std::filesystem::file_size(files[0]), size);
}

// A crash while a new store writes its first MANIFEST leaves empty data
// files and no MANIFEST: nothing was ever stored, so it opens as new.
TEST_P(NativeDurabilityFormatTest, CrashDuringCreationOpensAsNewStore) {
  AddRule({.op = io::FaultOp::kRename, .times_max = 1});
  ASSERT_FALSE(OpenRowStore(Options(), {{kTable, "emb", kRowBytes}}).ok());
  fault_env_.ClearRules();
  ASSERT_FALSE(DataFiles().empty());
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, {}, {1, 2});
}

// Truncating the data file and deleting obsolete files come after the switch:
// their failure is counted and retried, the checkpoint itself succeeded.
TEST_F(NativeDurabilityTest, CleanupErrorsAfterDurableSwitchAreNotCheckpointFailures) {
  RowStoreOptions options = Options();
  options.gc_space_amp_trigger = 1.01;  // garbage-collect at every checkpoint with garbage
  auto opened = OpenRowStore(options, {{kTable, "emb", kRowBytes}});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto store = std::move(opened).value();
  std::vector<Key> keys;
  for (Key k = 0; k < 300; ++k) keys.push_back(k);
  Model model;
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 1, &model).ok());
  ASSERT_TRUE(store->Checkpoint(Bytes("1")).ok());
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 2, &model).ok());
  const std::vector<std::string> before = DataFiles();
  ASSERT_EQ(before.size(), 1u);
  AddRule({.op = io::FaultOp::kDelete, .path_substring = ".pages", .times_max = 1});
  AddRule({.op = io::FaultOp::kTruncate, .path_substring = ".pages", .times_max = 1});
  Status s = store->Checkpoint(Bytes("2"));
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(store->Stats().cleanup_errors, 2u);
  EXPECT_EQ(store->CheckpointMeta(), Bytes("2"));
  EXPECT_EQ(DataFiles().size(), 2u);  // the pre-GC file is still there ...
  fault_env_.ClearRules();
  ASSERT_TRUE(store->Checkpoint(Bytes("3")).ok());
  const std::vector<std::string> after = DataFiles();
  ASSERT_EQ(after.size(), 1u);  // ... and deleted by the next checkpoint
  EXPECT_NE(after[0], before[0]);
  ExpectContent(*store, kTable, kRowBytes, model);
}

}  // namespace
}  // namespace strata::storage
