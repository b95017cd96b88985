// strata-test-labels: unit
// Format 2 with key ranges (SsdIndex::kRanges; docs/ssd-format.md, "Key
// ranges"): random puts, overwrites and deletes checked against a model
// between merges, at every checkpoint and after a reopen (which gives exactly
// the last checkpoint), with merges run in the writes and in the background;
// the layout a table was created with is kept whatever the options ask; bad
// option values are refused naming the field; base segments damaged with
// valid checksums (out of key order, a tombstone, a key of another range,
// two overlapping) are Corruption at open naming the file and offset.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>

#include "io/env.h"
#include "io/fault_env.h"
#include "storage/ssd/limits.h"
#include "storage/ssd/log_store.h"
#include "storage/ssd/manifest.h"
#include "storage/ssd/row_store_factory.h"
#include "storage/ssd/ssd_format.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/thread_names.h"

namespace strata::storage {
namespace {

using testing::Bytes;
using testing::ExpectContent;
using testing::Model;
using testing::PutRows;

constexpr TableId kTable = 3;
constexpr uint32_t kRowBytes = 200;  // 224-byte records, 292 per 64 KiB segment
const std::vector<TableSpec> kTables = {{kTable, "emb", kRowBytes}};

class NativeRangesTest : public ::testing::TestWithParam<bool> {
 protected:
  RowStoreOptions Options(SsdIndex index = SsdIndex::kRanges) {
    RowStoreOptions o;
    o.backend = SsdBackend::kNative;
    o.ssd_format_version = 2;
    o.ssd_index = index;
    o.ssd_range_bits = 2;
    o.ssd_segment_bytes = 64 << 10;
    o.ssd_background_cleaning = GetParam();
    o.dir = dir_.path() + "/store";
    o.env = &fault_env_;
    o.clean_hook = [this](CleanPoint p) {
      if (p == CleanPoint::kMergeWritten) ++merges_;
    };
    return o;
  }
  std::unique_ptr<RowStore> Open(const RowStoreOptions& o) {
    auto store = OpenRowStore(o, kTables);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Opens with `index`, applies batches [first, last] to the store and the
  // model, and checkpoints.
  void WriteAndCheckpoint(SsdIndex index, std::mt19937_64& rng, uint64_t first, uint64_t last,
                          Model* model);

  strata::testing::ScratchDir dir_;
  io::FaultEnv fault_env_{io::Env::Default()};
  std::atomic<int> merges_{0};
};

INSTANTIATE_TEST_SUITE_P(Merges, NativeRangesTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Background" : "InWrites";
                         });

// Applies one random batch (puts of new and stored keys, or deletes) to the
// store and the model.
void RandomBatch(RowStore& store, std::mt19937_64& rng, uint64_t version, Model* model) {
  constexpr Key kKeySpace = 6000;
  std::vector<Key> keys(1 + rng() % 400);
  for (Key& k : keys) k = rng() % kKeySpace;
  if (rng() % 5 == 0) {
    ASSERT_TRUE(store.Delete(kTable, keys).ok());
    for (Key k : keys) model->erase(k);
  } else {
    ASSERT_TRUE(PutRows(store, kTable, kRowBytes, keys, version, model).ok());
  }
}

void NativeRangesTest::WriteAndCheckpoint(SsdIndex index, std::mt19937_64& rng, uint64_t first,
                                          uint64_t last, Model* model) {
  auto store = Open(Options(index));
  ASSERT_NE(store, nullptr);
  for (uint64_t i = first; i <= last; ++i) RandomBatch(*store, rng, i, model);
  ASSERT_TRUE(store->Checkpoint({}).ok());
}

TEST_P(NativeRangesTest, MergesMatchModelAndReopenGivesLastCheckpoint) {
  Model model, checkpointed;
  std::mt19937_64 rng(11);
  {
    auto store = Open(Options());
    ASSERT_NE(store, nullptr);
    for (uint64_t i = 1; i <= 300; ++i) {
      RandomBatch(*store, rng, i, &model);
      if (i % 25 == 0) {
        ExpectContent(*store, kTable, kRowBytes, model, {6000, 6001, kKeyMax});
      }
      if (i % 60 == 0) {
        ASSERT_TRUE(store->Checkpoint(Bytes(std::to_string(i))).ok());
        checkpointed = model;
      }
    }
    ExpectContent(*store, kTable, kRowBytes, model);
    const RowStoreStats st = store->Stats();
    EXPECT_GT(merges_.load(), 0) << "no merge ran";
    // Space: the log's budget (0.35) and the stall slack over the base, plus
    // a partly filled head and base segment per range.
    EXPECT_LE(double(st.file_bytes), 2.0 * double(st.live_bytes) + 8.0 * (64 << 10))
        << st.file_bytes << " file bytes for " << st.live_bytes << " live bytes";
  }
  auto store = Open(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CheckpointMeta(), Bytes("300"));
  ExpectContent(*store, kTable, kRowBytes, checkpointed);
  EXPECT_EQ(store->Stats().live_rows, checkpointed.size());  // the rebuild counts exactly
  // More merges after the reopen, then another checkpoint and reopen.
  model = checkpointed;
  const int merges_before = merges_.load();
  for (uint64_t i = 301; i <= 400; ++i) RandomBatch(*store, rng, i, &model);
  ASSERT_TRUE(store->Checkpoint(Bytes("400")).ok());
  EXPECT_GT(merges_.load(), merges_before);
  store.reset();
  store = Open(Options());
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, model, {6000});
}

// Power loss after merges switched in, the files synced (Sync) and more
// writes appended: the merges' old segments stay until a checkpoint names
// the new ones, so the reopen gives the checkpoint before them; after a
// checkpoint the old slots are reused, and a power loss then gives that
// checkpoint.
TEST_P(NativeRangesTest, PowerLossAfterMergeSwitchSyncAndSlotReuseGivesCheckpoint) {
  Model model;
  std::mt19937_64 rng(21);
  auto store = Open(Options());
  ASSERT_NE(store, nullptr);
  for (uint64_t i = 1; i <= 60; ++i) RandomBatch(*store, rng, i, &model);
  ASSERT_TRUE(store->Checkpoint(Bytes("a")).ok());
  const Model at_a = model;
  const int merges_at_a = merges_.load();
  uint64_t version = 61;
  while (merges_.load() < merges_at_a + 2) RandomBatch(*store, rng, version++, &model);
  ASSERT_TRUE(store->Sync().ok());
  for (int i = 0; i < 20; ++i) RandomBatch(*store, rng, version++, &model);
  store.reset();
  ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
  store = Open(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CheckpointMeta(), Bytes("a"));
  ExpectContent(*store, kTable, kRowBytes, at_a);

  model = at_a;
  const int merges_at_b = merges_.load();
  while (merges_.load() < merges_at_b + 2) RandomBatch(*store, rng, version++, &model);
  ASSERT_TRUE(store->Checkpoint(Bytes("b")).ok());
  const Model at_b = model;
  // Freed slots are reused by these writes and merges.
  const int merges_at_c = merges_.load();
  while (merges_.load() < merges_at_c + 2) RandomBatch(*store, rng, version++, &model);
  ASSERT_TRUE(store->Sync().ok());
  store.reset();
  ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
  store = Open(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CheckpointMeta(), Bytes("b"));
  ExpectContent(*store, kTable, kRowBytes, at_b);
}

TEST_P(NativeRangesTest, UncheckpointedWritesAndMergesAreGoneAfterReopen) {
  Model model;
  std::mt19937_64 rng(5);
  {
    auto store = Open(Options());
    ASSERT_NE(store, nullptr);
    for (uint64_t i = 1; i <= 80; ++i) RandomBatch(*store, rng, i, &model);
    ASSERT_TRUE(store->Checkpoint(Bytes("c")).ok());
    Model after = model;
    const int merges_before = merges_.load();
    for (uint64_t i = 81; i <= 200; ++i) RandomBatch(*store, rng, i, &after);
    EXPECT_GT(merges_.load(), merges_before);  // merges ran after the checkpoint
    ExpectContent(*store, kTable, kRowBytes, after);
  }
  auto store = Open(Options());
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, model);
}

TEST_P(NativeRangesTest, TableKeepsItsLayoutWhateverTheOptionsAsk) {
  Model model;
  std::mt19937_64 rng(7);
  ASSERT_NO_FATAL_FAILURE(WriteAndCheckpoint(SsdIndex::kRanges, rng, 1, 60, &model));
  {
    // Ranges kept under kExact: merges (not cleaning) go on.
    auto store = Open(Options(SsdIndex::kExact));
    ASSERT_NE(store, nullptr);
    ExpectContent(*store, kTable, kRowBytes, model);
    const int merges_before = merges_.load();
    for (uint64_t i = 61; i <= 160; ++i) RandomBatch(*store, rng, i, &model);
    EXPECT_GT(merges_.load(), merges_before);
    ASSERT_TRUE(store->Checkpoint({}).ok());
  }
  auto store = Open(Options(SsdIndex::kCompact));
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, model);
}

TEST_P(NativeRangesTest, TableWithoutRangesStaysWithoutRanges) {
  Model model;
  std::mt19937_64 rng(9);
  ASSERT_NO_FATAL_FAILURE(WriteAndCheckpoint(SsdIndex::kExact, rng, 1, 60, &model));
  auto store = Open(Options(SsdIndex::kRanges));
  ASSERT_NE(store, nullptr);
  for (uint64_t i = 61; i <= 160; ++i) RandomBatch(*store, rng, i, &model);
  EXPECT_EQ(merges_.load(), 0);  // cleaned, never merged
  ExpectContent(*store, kTable, kRowBytes, model);
}

// A directory with key ranges has a MANIFEST framed as version 3 (a build
// that predates ranges refuses it instead of reading base segments as a
// plain log); without ranges it stays version 2; both reopen.
TEST_P(NativeRangesTest, ManifestOfRangesIsVersionThree) {
  for (SsdIndex index : {SsdIndex::kRanges, SsdIndex::kExact}) {
    SCOPED_TRACE(index == SsdIndex::kRanges ? "ranges" : "exact");
    std::filesystem::remove_all(dir_.path() + "/store");
    Model model;
    std::mt19937_64 rng(11);
    ASSERT_NO_FATAL_FAILURE(WriteAndCheckpoint(index, rng, 1, 20, &model));
    auto version = ReadManifestVersion(io::Env::Default(), dir_.path() + "/store");
    ASSERT_TRUE(version.ok()) << version.status().ToString();
    EXPECT_EQ(version->value_or(0), index == SsdIndex::kRanges ? 3u : 2u);
    auto manifest = ReadManifestV2(io::Env::Default(), dir_.path() + "/store");
    ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
    EXPECT_EQ((*manifest)->ranges, index == SsdIndex::kRanges);
    auto store = Open(Options(index));
    ASSERT_NE(store, nullptr);
    ExpectContent(*store, kTable, kRowBytes, model);
  }
}

// The background cleaner (which merges ranges) is a named thread, and goes
// with the store.
TEST_P(NativeRangesTest, BackgroundThreadIsNamedAndEndsWithTheStore) {
  auto count = [] {
    std::vector<std::string> names = strata::testing::ThreadNames();
    return std::count(names.begin(), names.end(), std::string("strata-ssd-gc"));
  };
  ASSERT_EQ(count(), 0);
  auto store = Open(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(count(), GetParam() ? 1 : 0);
  store.reset();
  EXPECT_EQ(count(), 0);
}

// A write error at each of the first write calls of a put (its records'
// write, which runs while the index takes the records, or a merge's in the
// writes): a put whose own write fails fails and changes nothing (the row
// count is not compared: a merge may make its estimate exact meanwhile); a
// merge's failed write fails no put (the merge is retried after its
// back-off); the next put goes on; power loss then gives the last
// checkpoint.
TEST_P(NativeRangesTest, FailedPutChangesNothingAndPowerLossGivesCheckpoint) {
  Model model;
  std::mt19937_64 rng(12);
  auto store = Open(Options());
  ASSERT_NE(store, nullptr);
  for (uint64_t i = 1; i <= 60; ++i) RandomBatch(*store, rng, i, &model);
  ASSERT_TRUE(store->Checkpoint(Bytes("base")).ok());
  const Model checkpointed = model;
  for (uint64_t i = 61; i <= 100; ++i) RandomBatch(*store, rng, i, &model);
  std::vector<Key> batch(1500);
  for (Key& k : batch) k = rng() % 7000;  // overwrites and new keys
  int failed = 0;
  for (uint64_t nth = 1; nth <= 6 || (failed == 0 && nth <= 400); ++nth) {
    SCOPED_TRACE(nth);
    Status s = testing::PutRowsFailingNthLogWrite(fault_env_, *store, kTable, kRowBytes, batch,
                                                  1000 + nth, nth, &model);
    if (s.ok()) continue;  // the nth write came after the call's last one
    ++failed;
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    ExpectContent(*store, kTable, kRowBytes, model, {6000, 6999});
  }
  EXPECT_GT(failed, 0) << "no write of the put failed";
  const Status s = PutRows(*store, kTable, kRowBytes, batch, 2000, &model);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ExpectContent(*store, kTable, kRowBytes, model);
  store.reset();
  ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
  store = Open(Options());
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CheckpointMeta(), Bytes("base"));
  ExpectContent(*store, kTable, kRowBytes, checkpointed);
}

// A base segment of a checkpointed table, as its file holds it.
struct BaseOnDisk {
  uint64_t offset;  // of its header in the file
  uint64_t seq;
  uint32_t records;
  uint32_t range;
};

constexpr uint32_t kRecordBytes = ssd::RecordBytes(kRowBytes);

uint64_t RecordAt(const BaseOnDisk& b, uint64_t i) {
  return b.offset + ssd::kSegmentHeaderBytes + i * kRecordBytes;
}

std::vector<std::byte> ReadBytes(const std::string& path, uint64_t offset, size_t n) {
  std::vector<std::byte> bytes(n);
  std::ifstream f(path, std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  f.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(n));
  EXPECT_TRUE(f.good()) << "read of " << path << " at " << offset;
  return bytes;
}

// Writes record `i` of `b` with `key` and `kind` (its row unchanged) and a
// valid checksum for that place.
void RewriteRecord(const std::string& path, const BaseOnDisk& b, uint64_t i, Key key,
                   uint8_t kind) {
  std::vector<std::byte> rec = ReadBytes(path, RecordAt(b, i), kRecordBytes);
  ssd::RecordHeader h;
  std::memcpy(&h, rec.data(), sizeof(h));
  h.key = key;
  h.seq_kind = (h.seq_kind & ((uint64_t{1} << 48) - 1)) | uint64_t{kind} << 48;
  std::memcpy(rec.data(), &h, sizeof(h));
  h.checksum = XXH3_64bits_withSeed(rec.data() + 8, ssd::kRecordHeaderBytes - 8 + kRowBytes,
                                    ssd::RecordSeed(kTable, b.seq, i));
  std::memcpy(rec.data(), &h.checksum, 8);
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(RecordAt(b, i)));
  f.write(reinterpret_cast<const char*>(rec.data()), static_cast<std::streamsize>(rec.size()));
  ASSERT_TRUE(f.good()) << "write of " << path;
}

Key KeyOf(const std::string& path, const BaseOnDisk& b, uint64_t i) {
  ssd::RecordHeader h;
  std::memcpy(&h, ReadBytes(path, RecordAt(b, i), sizeof(h)).data(), sizeof(h));
  return h.key;
}

// The checksums hold; what open checks of a base is its content: each kind
// of damage is Corruption naming the log file and the bad record's (or
// segment's) offset, and changes nothing on disk.
TEST_P(NativeRangesTest, DamagedBaseSegmentsAreCorruptionAtOpen) {
  Model model;
  std::mt19937_64 rng(13);
  ASSERT_NO_FATAL_FAILURE(WriteAndCheckpoint(SsdIndex::kRanges, rng, 1, 150, &model));
  const std::string pristine = dir_.path() + "/pristine";
  std::filesystem::rename(dir_.path() + "/store", pristine);
  auto manifest = ReadManifestV2(io::Env::Default(), pristine);
  ASSERT_TRUE(manifest.ok() && manifest->has_value()) << manifest.status().ToString();
  const ManifestTableV2& table = (*manifest)->tables.at(0);
  const std::string file = ssd::LogDataFileName(kTable, table.file_number);
  // The bases, per range in key order.
  std::vector<std::vector<BaseOnDisk>> bases(4);
  for (const ssd::SegmentRecord& seg : table.segments) {
    const uint64_t offset = uint64_t{seg.slot} * table.segment_bytes;
    ssd::SegmentHeader header;
    std::memcpy(&header, ReadBytes(pristine + "/" + file, offset, sizeof(header)).data(),
                sizeof(header));
    if (header.kind != ssd::kSegmentBase || seg.record_count < 2) continue;
    const uint32_t range = ssd::LayoutRange(header.layout);
    ASSERT_LT(range, bases.size());
    bases[range].push_back({offset, seg.segment_seq, seg.record_count, range});
  }
  for (auto& r : bases) {
    std::sort(r.begin(), r.end(), [&](const BaseOnDisk& a, const BaseOnDisk& b) {
      return ssd::MixKey(KeyOf(pristine + "/" + file, a, 0)) <
             ssd::MixKey(KeyOf(pristine + "/" + file, b, 0));
    });
  }
  const auto two = std::find_if(bases.begin(), bases.end(), [](auto& r) { return r.size() >= 2; });
  ASSERT_NE(two, bases.end()) << "no range has two base segments";
  const BaseOnDisk& a = (*two)[0];
  const BaseOnDisk& b = (*two)[1];
  const uint32_t other_range = (a.range + 1) % 4;
  Key foreign = 0;  // a key of another range
  while (ssd::MixKey(foreign) >> 62 != other_range) ++foreign;

  struct Damage {
    const char* what;
    std::function<void(const std::string&)> apply;
    uint64_t offset;  // named by the error
    const char* message;
  };
  const std::vector<Damage> damages = {
      {"two records swapped",
       [&](const std::string& path) {
         const Key k0 = KeyOf(path, a, 0), k1 = KeyOf(path, a, 1);
         RewriteRecord(path, a, 0, k1, ssd::kRecordRow);
         RewriteRecord(path, a, 1, k0, ssd::kRecordRow);
       },
       RecordAt(a, 1), "out of key order"},
      {"a tombstone",
       [&](const std::string& path) {
         RewriteRecord(path, a, 0, KeyOf(path, a, 0), ssd::kRecordTombstone);
       },
       RecordAt(a, 0), "not a row"},
      {"a key of another range",
       [&](const std::string& path) { RewriteRecord(path, a, 0, foreign, ssd::kRecordRow); },
       RecordAt(a, 0), "in a segment of range"},
      {"two segments overlapping",
       [&](const std::string& path) {
         RewriteRecord(path, b, 0, KeyOf(path, a, a.records - 1), ssd::kRecordRow);
       },
       b.offset, "overlap in key order"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    const std::string dir = dir_.path() + "/store";
    std::filesystem::remove_all(dir);
    std::filesystem::copy(pristine, dir, std::filesystem::copy_options::recursive);
    d.apply(dir + "/" + file);
    const std::vector<std::byte> damaged =
        ReadBytes(dir + "/" + file, 0, std::filesystem::file_size(dir + "/" + file));
    auto store = OpenRowStore(Options(), kTables);
    ASSERT_FALSE(store.ok()) << "a damaged base opened";
    EXPECT_TRUE(store.status().IsCorruption()) << store.status().ToString();
    const std::string& message = store.status().message();
    EXPECT_NE(message.find(dir + "/" + file), std::string::npos) << message;
    EXPECT_NE(message.find("offset " + std::to_string(d.offset)), std::string::npos) << message;
    EXPECT_NE(message.find(d.message), std::string::npos) << message;
    EXPECT_EQ(ReadBytes(dir + "/" + file, 0, damaged.size()), damaged) << "the open wrote";
  }
  // Undamaged, it opens with every row.
  std::filesystem::remove_all(dir_.path() + "/store");
  std::filesystem::rename(pristine, dir_.path() + "/store");
  auto store = Open(Options());
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, model);
}

TEST_P(NativeRangesTest, BadOptionsAreRefusedNamingTheField) {
  auto expect_refused = [&](RowStoreOptions o, const std::string& field) {
    auto store = OpenRowStore(o, kTables);
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(store.status().message().find(field), std::string::npos) << store.status().ToString();
    EXPECT_FALSE(std::filesystem::exists(o.dir)) << "a refused open created " << o.dir;
  };
  RowStoreOptions o = Options();
  o.ssd_range_bits = 13;
  expect_refused(o, "ssd_range_bits");
  o = Options();
  o.ssd_merge_log_fraction = 0;
  expect_refused(o, "ssd_merge_log_fraction");
  o.ssd_merge_log_fraction = std::nan("");
  expect_refused(o, "ssd_merge_log_fraction");
  o = Options();
  o.ssd_index = static_cast<SsdIndex>(7);
  expect_refused(o, "ssd_index");
}

}  // namespace
}  // namespace strata::storage

namespace strata::storage {
namespace {

// A new table's range count follows its size hint (ranges of about
// kSsdRangeRecordBytes of records), capped at kRangeBitsMax; without a hint
// it is the option's.
TEST(NativeRangesLayoutTest, RangeCountFollowsTheTableSizeHint) {
  const uint64_t record = ssd::RecordBytes(kRowBytes);
  auto bits = [&](uint64_t rows) {
    return logstore::RangeBitsFor({kTable, "emb", kRowBytes, rows}, /*range_bits=*/6);
  };
  EXPECT_EQ(bits(0), 6u);
  EXPECT_EQ(bits(1), 0u);
  EXPECT_EQ(bits(kSsdRangeRecordBytes / record), 0u);
  EXPECT_EQ(bits(kSsdRangeRecordBytes / record + 1), 1u);
  EXPECT_EQ(bits(8 * kSsdRangeRecordBytes / record), 3u);
  EXPECT_EQ(bits(~uint64_t{0}), kRangeBitsMax);

  // On disk: a hinted small table's segments say one range, an unhinted
  // one's the option's 2^6, and a reopen keeps them whatever it asks.
  strata::testing::ScratchDir dir;
  RowStoreOptions o;
  o.ssd_format_version = 2;
  o.ssd_index = SsdIndex::kRanges;
  o.ssd_range_bits = 6;
  o.ssd_segment_bytes = 64 << 10;
  o.dir = dir.File("store");
  const std::vector<TableSpec> tables = {{1, "small", kRowBytes, 500}, {2, "unknown", kRowBytes}};
  Model m1, m2;
  std::vector<Key> keys;
  for (Key k = 0; k < 500; ++k) keys.push_back(k);
  {
    auto store = OpenRowStore(o, tables);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE(PutRows(**store, 1, kRowBytes, keys, 1, &m1).ok());
    ASSERT_TRUE(PutRows(**store, 2, kRowBytes, keys, 1, &m2).ok());
    ASSERT_TRUE((*store)->Checkpoint({}).ok());
  }
  auto manifest = ReadManifestV2(io::Env::Default(), o.dir);
  ASSERT_TRUE(manifest.ok() && manifest->has_value()) << manifest.status().ToString();
  for (const ManifestTableV2& t : (*manifest)->tables) {
    ASSERT_FALSE(t.segments.empty()) << t.spec.name;
    const std::string file = o.dir + "/" + ssd::LogDataFileName(t.spec.id, t.file_number);
    for (const ssd::SegmentRecord& seg : t.segments) {
      ssd::SegmentHeader header;
      std::ifstream in(file, std::ios::binary);
      in.seekg(static_cast<std::streamoff>(uint64_t{seg.slot} * t.segment_bytes));
      in.read(reinterpret_cast<char*>(&header), sizeof(header));
      ASSERT_TRUE(in.good()) << file;
      EXPECT_EQ(ssd::LayoutRangeBits(header.layout), t.spec.id == 1 ? 0u : 6u) << t.spec.name;
    }
  }
  o.ssd_range_bits = 3;
  auto store = OpenRowStore(o, {{1, "small", kRowBytes, 1ull << 40}, {2, "unknown", kRowBytes}});
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ExpectContent(**store, 1, kRowBytes, m1);
  ExpectContent(**store, 2, kRowBytes, m2);
}

}  // namespace
}  // namespace strata::storage
