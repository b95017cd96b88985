// strata-test-labels: unit
// One conformance suite for both RowStore backends (native, RocksDB), each
// result compared against a std::unordered_map model.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/row_store_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::storage {
namespace {

using testing::Bytes;
using testing::ExpectContent;
using testing::MakeRow;
using testing::Model;
using testing::PutRows;

struct Native {
  static constexpr SsdBackend kBackend = SsdBackend::kNative;
  static constexpr uint32_t kFormat = 1;
  static constexpr SsdIndex kIndex = SsdIndex::kCompact;
};
// Format version 2 with the smallest segments, so tests span many segments
// and the cleaner runs; with either DRAM index.
struct NativeV2 {
  static constexpr SsdBackend kBackend = SsdBackend::kNative;
  static constexpr uint32_t kFormat = 2;
  static constexpr SsdIndex kIndex = SsdIndex::kCompact;
};
struct NativeV2Exact {
  static constexpr SsdBackend kBackend = SsdBackend::kNative;
  static constexpr uint32_t kFormat = 2;
  static constexpr SsdIndex kIndex = SsdIndex::kExact;
};
// Key ranges (4, so that merges run in these small tests).
struct NativeV2Ranges {
  static constexpr SsdBackend kBackend = SsdBackend::kNative;
  static constexpr uint32_t kFormat = 2;
  static constexpr SsdIndex kIndex = SsdIndex::kRanges;
};
struct RocksDb {
  static constexpr SsdBackend kBackend = SsdBackend::kRocksDb;
  static constexpr uint32_t kFormat = 1;
  static constexpr SsdIndex kIndex = SsdIndex::kCompact;
};

constexpr uint32_t kRowBytes = 64;
const std::vector<TableSpec> kTables = {{1, "emb", kRowBytes}, {7, "tiny", 4}, {9, "wide", 5000}};

template <typename B>
class RowStoreConformanceTest : public ::testing::Test {
 protected:
  RowStoreOptions Options() const {
    RowStoreOptions o;
    o.backend = B::kBackend;
    o.ssd_format_version = B::kFormat;
    o.ssd_segment_bytes = 64 << 10;
    o.ssd_index = B::kIndex;
    o.ssd_range_bits = 2;
    o.dir = dir_.path() + "/store";
    o.rocksdb_block_cache_bytes = 8 << 20;
    o.rocksdb_write_buffer_bytes = 4 << 20;
    return o;
  }
  std::unique_ptr<RowStore> Open(const std::vector<TableSpec>& tables = kTables) {
    auto store = OpenRowStore(Options(), tables);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  strata::testing::ScratchDir dir_;
};

using Backends = ::testing::Types<Native, NativeV2, NativeV2Exact, NativeV2Ranges, RocksDb>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (T::kBackend == SsdBackend::kRocksDb) return "RocksDb";
    if (T::kFormat == 1) return "Native";
    if (T::kIndex == SsdIndex::kRanges) return "NativeV2Ranges";
    return T::kIndex == SsdIndex::kExact ? "NativeV2Exact" : "NativeV2";
  }
};
TYPED_TEST_SUITE(RowStoreConformanceTest, Backends, BackendNames);

TYPED_TEST(RowStoreConformanceTest, PutGetRoundTripAndMissingKeys) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  Model model;
  std::vector<Key> keys;
  for (Key k = 1; k <= 1000; ++k) keys.push_back(k * 7919);
  ASSERT_TRUE(PutRows(*store, 1, kRowBytes, keys, 0, &model).ok());
  ExpectContent(*store, 1, kRowBytes, model, {2, 3, 5, 1001 * 7919});
  // A missing key leaves its row bytes untouched.
  std::vector<Key> missing{424242};
  std::vector<std::byte> row(kRowBytes, std::byte{0x5A});
  std::vector<uint8_t> found(1, 1);
  ASSERT_TRUE(store->MultiGet(1, missing, row, found).ok());
  EXPECT_EQ(found[0], 0);
  for (std::byte b : row) ASSERT_EQ(b, std::byte{0x5A});
  EXPECT_EQ(store->Stats().rows_written, 1000u);
}

TYPED_TEST(RowStoreConformanceTest, OverwriteAndDelete) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  Model model;
  std::vector<Key> keys;
  for (Key k = 0; k < 500; ++k) keys.push_back(k);
  ASSERT_TRUE(PutRows(*store, 1, kRowBytes, keys, 0, &model).ok());
  std::vector<Key> half(keys.begin(), keys.begin() + 250);
  ASSERT_TRUE(PutRows(*store, 1, kRowBytes, half, 1, &model).ok());
  std::vector<Key> gone{0, 10, 499, 123456789};  // the last was never there
  ASSERT_TRUE(store->Delete(1, gone).ok());
  for (Key k : gone) model.erase(k);
  ExpectContent(*store, 1, kRowBytes, model, gone);
  // A batch naming a key twice keeps the last row.
  std::vector<Key> twice{77, 77};
  std::vector<std::byte> rows(2 * kRowBytes);
  auto r1 = MakeRow(77, 5, kRowBytes), r2 = MakeRow(77, 6, kRowBytes);
  std::copy(r1.begin(), r1.end(), rows.begin());
  std::copy(r2.begin(), r2.end(), rows.begin() + kRowBytes);
  ASSERT_TRUE(store->MultiPut(1, twice, rows).ok());
  model[77] = r2;
  ExpectContent(*store, 1, kRowBytes, model);
}

TYPED_TEST(RowStoreConformanceTest, ExtremeKeys) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  Model model;
  const std::vector<Key> keys{0, 1, kKeyMax, kKeyMax - 1, Key{1} << 63, (Key{1} << 63) - 1};
  ASSERT_TRUE(PutRows(*store, 1, kRowBytes, keys, 3, &model).ok());
  ExpectContent(*store, 1, kRowBytes, model, {2, kKeyMax - 2});
  ASSERT_TRUE(store->Delete(1, std::vector<Key>{0, kKeyMax}).ok());
  model.erase(0);
  model.erase(kKeyMax);
  ExpectContent(*store, 1, kRowBytes, model, {0, kKeyMax});
}

TYPED_TEST(RowStoreConformanceTest, TablesAreIndependent) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  Model m1, m7, m9;
  std::vector<Key> keys{0, 5, 6, kKeyMax};
  ASSERT_TRUE(PutRows(*store, 1, 64, keys, 1, &m1).ok());
  ASSERT_TRUE(PutRows(*store, 7, 4, {5, 8}, 2, &m7).ok());
  ASSERT_TRUE(PutRows(*store, 9, 5000, {6, 9, kKeyMax}, 3, &m9).ok());
  ExpectContent(*store, 1, 64, m1, {8, 9});
  ExpectContent(*store, 7, 4, m7, {0, 6});
  ExpectContent(*store, 9, 5000, m9, {0, 5});
  EXPECT_EQ(store->Tables().size(), 3u);
}

TYPED_TEST(RowStoreConformanceTest, BadArgumentsAreRejected) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  std::vector<Key> keys{1};
  std::vector<std::byte> row(kRowBytes);
  std::vector<uint8_t> found(1);
  Status s = store->MultiGet(42, keys, row, found);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("42"), std::string::npos) << s.ToString();
  EXPECT_TRUE(store->MultiPut(1, keys, std::span(row).first(3)).IsInvalidArgument());
  EXPECT_TRUE(store->MultiGet(1, keys, std::span(row).first(3), found).IsInvalidArgument());
  ExpectContent(*store, 1, kRowBytes, {}, {1});
}

TYPED_TEST(RowStoreConformanceTest, Batch100k) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  Model model;
  std::mt19937_64 rng(11);
  std::vector<Key> keys(100000);
  for (Key& k : keys) k = rng();
  ASSERT_TRUE(PutRows(*store, 1, kRowBytes, keys, 0, &model).ok());
  ExpectContent(*store, 1, kRowBytes, model);
  ASSERT_TRUE(store->Checkpoint({}).ok());
  EXPECT_EQ(store->Stats().rows_written, 100000u);
}

TYPED_TEST(RowStoreConformanceTest, RandomOperationsMatchModelAcrossReopen) {
  std::mt19937_64 rng(5);
  Model model, checkpointed;
  std::vector<std::byte> checkpointed_meta;
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  for (int step = 0; step < 120; ++step) {
    const int op = int(rng() % 10);
    std::vector<Key> keys(1 + rng() % 300);
    for (Key& k : keys) k = rng() % 3000 == 0 ? kKeyMax - rng() % 3 : rng() % 4000;
    if (op < 5) {
      ASSERT_TRUE(PutRows(*store, 1, kRowBytes, keys, step, &model).ok());
    } else if (op < 7) {
      ASSERT_TRUE(store->Delete(1, keys).ok());
      for (Key k : keys) model.erase(k);
    } else if (op < 9) {
      const std::string meta = "step " + std::to_string(step);
      ASSERT_TRUE(store->Checkpoint(Bytes(meta)).ok());
      checkpointed = model;
      checkpointed_meta = Bytes(meta);
    } else {  // reopen without a checkpoint: back to the last one
      store.reset();
      store = this->Open();
      ASSERT_NE(store, nullptr);
      model = checkpointed;
      EXPECT_EQ(store->CheckpointMeta(), checkpointed_meta);
    }
    if (step % 20 == 0) ExpectContent(*store, 1, kRowBytes, model, {kKeyMax, 4001});
  }
  ExpectContent(*store, 1, kRowBytes, model);
}

TYPED_TEST(RowStoreConformanceTest, ReopenAfterCleanCloseGivesCheckpoint) {
  Model model;
  {
    auto store = this->Open();
    ASSERT_NE(store, nullptr);
    std::vector<Key> keys;
    for (Key k = 0; k < 3000; ++k) keys.push_back(k * 3);
    ASSERT_TRUE(PutRows(*store, 1, kRowBytes, keys, 1, &model).ok());
    ASSERT_TRUE(PutRows(*store, 9, 5000, {1, 2}, 1, nullptr).ok());
    ASSERT_TRUE(store->Checkpoint(Bytes("clocks")).ok());
    ASSERT_TRUE(PutRows(*store, 1, kRowBytes, {1, 3, 5}, 2, nullptr).ok());  // discarded
    ASSERT_TRUE(store->Delete(1, std::vector<Key>{0, 6}).ok());              // discarded
  }
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CheckpointMeta(), Bytes("clocks"));
  ExpectContent(*store, 1, kRowBytes, model, {1, 5});
  EXPECT_EQ(store->Stats().live_rows >= 3000, true);
}

TYPED_TEST(RowStoreConformanceTest, FreshStoreReopensEmpty) {
  { ASSERT_NE(this->Open(), nullptr); }
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->CheckpointMeta().empty());
  ExpectContent(*store, 1, kRowBytes, {}, {0, kKeyMax});
}

TYPED_TEST(RowStoreConformanceTest, ReopenWithOtherTablesFailsAndChangesNothing) {
  Model model;
  {
    auto store = this->Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(PutRows(*store, 1, kRowBytes, {1, 2, 3}, 1, &model).ok());
    ASSERT_TRUE(store->Checkpoint(Bytes("m")).ok());
  }
  auto wrong_size = kTables;
  wrong_size[2].row_bytes = 4096;
  auto wrong_name = kTables;
  wrong_name[1].name = "other";
  auto missing = kTables;
  missing.pop_back();
  auto extra = kTables;
  extra.push_back({11, "extra", 8});
  for (const auto& [tables, named] : std::vector<std::pair<std::vector<TableSpec>, std::string>>{
           {wrong_size, "wide"}, {wrong_name, "other"}, {missing, "wide"}, {extra, "extra"}}) {
    auto store = OpenRowStore(this->Options(), tables);
    ASSERT_FALSE(store.ok());
    EXPECT_TRUE(store.status().IsInvalidArgument()) << store.status().ToString();
    EXPECT_NE(store.status().message().find(named), std::string::npos) << store.status().ToString();
  }
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->CheckpointMeta(), Bytes("m"));
  ExpectContent(*store, 1, kRowBytes, model);
}

TYPED_TEST(RowStoreConformanceTest, InvalidTableSpecsAreRejected) {
  RowStoreOptions o = this->Options();
  EXPECT_TRUE(OpenRowStore(o, {}).status().IsInvalidArgument());
  EXPECT_TRUE(OpenRowStore(o, {{1, "a", 0}}).status().IsInvalidArgument());
  EXPECT_TRUE(OpenRowStore(o, {{1, "a", 8}, {1, "b", 8}}).status().IsInvalidArgument());
  EXPECT_TRUE(OpenRowStore(o, {{1, "a", 8}, {2, "a", 8}}).status().IsInvalidArgument());
}

TYPED_TEST(RowStoreConformanceTest, ConcurrentReadersAndWriters) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  constexpr int kWriters = 2, kRounds = 40;
  constexpr Key kKeysPerWriter = 2000;
  std::atomic<bool> failed{false};
  std::atomic<int> writers_done{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w);
      for (int round = 1; round <= kRounds; ++round) {
        std::vector<Key> keys(200);
        for (Key& k : keys) k = Key(w) * kKeysPerWriter + rng() % kKeysPerWriter;
        if (!PutRows(*store, 1, kRowBytes, keys, round, nullptr).ok()) failed = true;
        if (round % 10 == 0 && !store->Delete(1, std::span(keys).first(20)).ok()) failed = true;
      }
      ++writers_done;
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      std::mt19937_64 rng(100);
      std::vector<Key> keys(256);
      std::vector<std::byte> rows(keys.size() * kRowBytes);
      std::vector<uint8_t> found(keys.size());
      while (writers_done.load() < kWriters && !failed) {
        for (Key& k : keys) k = rng() % (kWriters * kKeysPerWriter);
        if (!store->MultiGet(1, keys, rows, found).ok()) failed = true;
        for (size_t i = 0; i < keys.size(); ++i) {  // a found row is whole: some version of its key
          if (!found[i]) continue;
          uint64_t version;
          std::memcpy(&version, rows.data() + i * kRowBytes + 8, 8);
          if (MakeRow(keys[i], version, kRowBytes) !=
              testing::Row(rows.begin() + i * kRowBytes, rows.begin() + (i + 1) * kRowBytes)) {
            failed = true;
          }
        }
      }
    });
  }
  threads.emplace_back([&] {  // a few checkpoints while the others run
    for (int i = 0; i < 4 && writers_done.load() < kWriters && !failed; ++i) {
      if (!store->Checkpoint({}).ok()) failed = true;
    }
  });
  for (auto& t : threads) t.join();
  EXPECT_FALSE(failed.load());
}

}  // namespace
}  // namespace strata::storage
