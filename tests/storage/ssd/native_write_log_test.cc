// strata-test-labels: unit
// Native write log: random puts, overwrites, deletes and gets against a
// std::unordered_map through many merges of a small log (and with no log),
// checkpoint and reopen; a failed log write changes nothing; a damaged log
// record is Corruption naming the log file (a damaged key fails the merge);
// power loss drops the log and gives the last checkpoint; small appends share
// units (the one not yet full held in DRAM); random overwrites through the
// log write less than rewriting leaves.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include "io/fault_env.h"
#include "storage/ssd/row_store_factory.h"
#include "storage/ssd/ssd_format.h"
#include "tests/storage/ssd/row_store_test_util.h"

namespace strata::storage {
namespace {

using testing::ExpectContent;
using testing::Model;
using testing::PutRows;

constexpr uint32_t kRowBytes = 512;
constexpr TableId kTable = 3;

class NativeWriteLogTest : public testing::NativeRowStoreFixture {
 protected:
  NativeWriteLogTest() : NativeRowStoreFixture(kTable, kRowBytes) {}
  std::unique_ptr<RowStore> OpenWith(double fraction, uint64_t entries_min) {
    RowStoreOptions o = Options();
    o.write_log_fraction = fraction;
    o.write_log_entries_min = entries_min;
    auto store = OpenRowStore(o, {{kTable, "emb", kRowBytes}});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  std::string LogFile() { return Options().dir + "/" + ssd::LogFileName(kTable); }
  // A store with a large log holding rows 0..n-1 (version 0), in `*keys`
  // and `*model`.
  std::unique_ptr<RowStore> OpenWithRows(Key n, std::vector<Key>* keys, Model* model) {
    auto store = OpenWith(0.25, 100000);
    if (store == nullptr) return nullptr;
    for (Key k = 0; k < n; ++k) keys->push_back(k);
    EXPECT_TRUE(PutRows(*store, kTable, kRowBytes, *keys, 0, model).ok());
    return store;
  }
  // Closes `*store`, reopens it with a large log and checks it holds `model`.
  void ReopenAndExpect(std::unique_ptr<RowStore>* store, const Model& model) {
    store->reset();
    *store = OpenWith(0.25, 100000);
    ASSERT_NE(*store, nullptr);
    ExpectContent(**store, kTable, kRowBytes, model);
  }
};

// Random operations; `fraction` 0 writes leaves directly.
void RunRandomOps(std::unique_ptr<RowStore> store, uint64_t seed,
                  const std::function<std::unique_ptr<RowStore>()>& reopen) {
  std::mt19937_64 rng(seed);
  Model model, checkpointed;
  for (int step = 0; step < 300; ++step) {
    std::vector<Key> keys(1 + rng() % 120);
    for (Key& k : keys) k = rng() % 3000;
    if (rng() % 7 == 0) keys.push_back(~Key{0});
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4:
        ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, step, &model).ok());
        break;
      case 5:
        ASSERT_TRUE(store->Delete(kTable, keys).ok());
        for (Key k : keys) model.erase(k);
        break;
      case 6: {
        std::vector<std::byte> rows(keys.size() * kRowBytes);
        std::vector<uint8_t> found(keys.size());
        ASSERT_TRUE(store->MultiGet(kTable, keys, rows, found).ok());
        for (size_t i = 0; i < keys.size(); ++i) {
          auto it = model.find(keys[i]);
          ASSERT_EQ(found[i], it != model.end() ? 1 : 0) << "key " << keys[i];
          if (it != model.end()) {
            ASSERT_EQ(std::memcmp(rows.data() + i * kRowBytes, it->second.data(), kRowBytes), 0)
                << "row of key " << keys[i] << " at step " << step;
          }
        }
        break;
      }
      case 7:
        ASSERT_TRUE(store->Checkpoint({}).ok());
        checkpointed = model;
        EXPECT_EQ(store->Stats().live_rows, model.size());
        break;
      case 8:
        if (step % 4 == 0) {  // reopen: the last checkpoint, exactly
          store.reset();
          store = reopen();
          ASSERT_NE(store, nullptr);
          model = checkpointed;
          ExpectContent(*store, kTable, kRowBytes, model);
        }
        break;
      default:
        ExpectContent(*store, kTable, kRowBytes, model, {~Key{0} - 1});
    }
  }
  ExpectContent(*store, kTable, kRowBytes, model);
}

TEST_F(NativeWriteLogTest, RandomOpsThroughManyMergesMatchModel) {
  auto reopen = [&] { return OpenWith(0.25, 50); };
  RunRandomOps(reopen(), 1, reopen);
}

TEST_F(NativeWriteLogTest, RandomOpsWithoutLogMatchModel) {
  auto reopen = [&] { return OpenWith(0, 50); };
  RunRandomOps(reopen(), 2, reopen);
}

TEST_F(NativeWriteLogTest, RandomOpsWithLargeLogMatchModel) {
  auto reopen = [&] { return OpenWith(4, 100000); };  // merged only at checkpoints
  RunRandomOps(reopen(), 3, reopen);
}

TEST_F(NativeWriteLogTest, FailedLogWriteChangesNothing) {
  auto store = OpenWith(0.25, 100000);
  ASSERT_NE(store, nullptr);
  Model model;
  std::vector<Key> keys;
  for (Key k = 0; k < 500; ++k) keys.push_back(k * 7);
  // In the log: 71 whole units of 7 records written, the last 3 records held
  // in DRAM; the failed call below would have completed their unit.
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 0, &model).ok());
  for (int error : {EIO, ENOSPC}) {
    io::FaultRule rule;
    rule.op = io::FaultOp::kWrite;
    rule.path_substring = ".log";
    rule.error_number = error;
    ASSERT_TRUE(fault_env_.AddRule(rule).ok());
    Status s = PutRows(*store, kTable, kRowBytes, keys, 1, nullptr);
    EXPECT_TRUE(s.IsIOError()) << s.ToString();
    EXPECT_NE(s.message().find(".log"), std::string::npos) << s.ToString();
    fault_env_.ClearRules();
    ExpectContent(*store, kTable, kRowBytes, model);  // the rows before the failed call
  }
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, {7, 1}, 2, &model).ok());  // usable again
  ExpectContent(*store, kTable, kRowBytes, model);
  ASSERT_TRUE(store->Checkpoint({}).ok());
  ReopenAndExpect(&store, model);
}

TEST_F(NativeWriteLogTest, FailedMergeKeepsTheLogAndRetries) {
  Model model;
  std::vector<Key> keys;
  auto store = OpenWithRows(10000, &keys, &model);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Checkpoint({}).ok());  // over 1024 leaves: a merge takes several rounds
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 1, &model).ok());
  io::FaultRule rule;  // the merge's leaf writes fail after the first round
  rule.op = io::FaultOp::kWrite;
  rule.path_substring = ".pages";
  rule.nth_call = 2;
  ASSERT_TRUE(fault_env_.AddRule(rule).ok());
  EXPECT_FALSE(store->Checkpoint({}).ok());
  fault_env_.ClearRules();
  ExpectContent(*store, kTable, kRowBytes, model);
  ASSERT_TRUE(store->Checkpoint({}).ok());
  EXPECT_EQ(store->Stats().live_rows, model.size());
  ReopenAndExpect(&store, model);
}

TEST_F(NativeWriteLogTest, DamagedLogRecordIsCorruptionNamingTheLog) {
  Model model;
  std::vector<Key> keys;
  auto store = OpenWithRows(100, &keys, &model);
  ASSERT_NE(store, nullptr);
  const ssd::LogLayout l = ssd::MakeLogLayout(kRowBytes);
  // Record 9 (key 9): unit 1, second record; flip a byte of its row.
  const uint64_t offset =
      uint64_t{9 / l.records_per_unit} * l.unit_bytes + (9 % l.records_per_unit) * l.record_bytes;
  const int fd = ::open(LogFile().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, offset + 100), 1);
  b ^= 0x20;
  ASSERT_EQ(::pwrite(fd, &b, 1, offset + 100), 1);
  ::close(fd);
  std::vector<Key> one{9};
  std::vector<std::byte> row(kRowBytes);
  std::vector<uint8_t> found(1);
  Status s = store->MultiGet(kTable, one, row, found);
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(LogFile() + " offset " + std::to_string(offset)), std::string::npos)
      << s.ToString();
  EXPECT_FALSE(store->Checkpoint({}).ok());  // the merge reads it too: nothing switched
  model.erase(9);
  std::vector<Key> rest;
  for (Key k : keys) {
    if (k != 9) rest.push_back(k);
  }
  std::vector<std::byte> rows(rest.size() * kRowBytes);
  std::vector<uint8_t> got(rest.size());
  ASSERT_TRUE(store->MultiGet(kTable, rest, rows, got).ok());  // other records still read
  for (size_t i = 0; i < rest.size(); ++i) {
    ASSERT_EQ(got[i], 1);
    ASSERT_EQ(std::memcmp(rows.data() + i * kRowBytes, model[rest[i]].data(), kRowBytes), 0);
  }
}

// A damaged key hides its record from the merge's sequential read (the
// key no longer leads to it): the merge reports Corruption of the log
// instead of dropping the row, and the log stays whole.
TEST_F(NativeWriteLogTest, DamagedLogRecordKeyFailsTheMerge) {
  Model model;
  std::vector<Key> keys;
  auto store = OpenWithRows(100, &keys, &model);
  ASSERT_NE(store, nullptr);
  const ssd::LogLayout l = ssd::MakeLogLayout(kRowBytes);
  const uint64_t offset = uint64_t{9 / l.records_per_unit} * l.unit_bytes +
                          (9 % l.records_per_unit) * l.record_bytes +
                          offsetof(ssd::LogRecordHeader, key);
  const int fd = ::open(LogFile().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, offset), 1);
  b ^= 0x40;
  ASSERT_EQ(::pwrite(fd, &b, 1, offset), 1);
  ::close(fd);
  Status s = store->Checkpoint({});
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(LogFile()), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("key is damaged"), std::string::npos) << s.ToString();
  model.erase(9);  // a get of key 9 reads its record and finds the key wrong
  std::vector<Key> rest;
  for (Key k : keys) {
    if (k != 9) rest.push_back(k);
  }
  std::vector<std::byte> rows(rest.size() * kRowBytes);
  std::vector<uint8_t> got(rest.size());
  ASSERT_TRUE(store->MultiGet(kTable, rest, rows, got).ok());
  for (size_t i = 0; i < rest.size(); ++i) {
    ASSERT_EQ(got[i], 1);
    ASSERT_EQ(std::memcmp(rows.data() + i * kRowBytes, model[rest[i]].data(), kRowBytes), 0);
  }
}

TEST_F(NativeWriteLogTest, InjectedLogReadErrorIsIOError) {
  auto store = OpenWith(0.25, 100000);
  ASSERT_NE(store, nullptr);
  // Keys 1..20 in the log: key 1 in its first unit, written (a unit not yet
  // full is held in DRAM and read without I/O).
  std::vector<Key> keys;
  for (Key k = 1; k <= 20; ++k) keys.push_back(k);
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 0, nullptr).ok());
  ExpectInjectedReadError(*store, ".log", 1);
}

// Appends of one row each fill units together: the device takes whole units
// only, each once; the rows of the unit not yet full are read from DRAM (a
// read error on the log does not reach them) and reach the leaves at the
// checkpoint's merge.
TEST_F(NativeWriteLogTest, SmallAppendsShareUnits) {
  auto store = OpenWith(0.25, 100000);
  ASSERT_NE(store, nullptr);
  const ssd::LogLayout l = ssd::MakeLogLayout(kRowBytes);
  ASSERT_GT(l.records_per_unit, 2u);
  const uint64_t before = store->Stats().bytes_written;
  Model model;
  const Key n = 3 * l.records_per_unit + 2;
  for (Key k = 0; k < n; ++k) {
    ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, {k * 11}, k, &model).ok());
  }
  EXPECT_EQ(store->Stats().bytes_written - before, 3u * l.unit_bytes);
  io::FaultRule rule;
  rule.op = io::FaultOp::kRead;
  rule.path_substring = ".log";
  ASSERT_TRUE(fault_env_.AddRule(rule).ok());
  std::vector<Key> held{(n - 2) * 11, (n - 1) * 11};
  std::vector<std::byte> rows(held.size() * kRowBytes);
  std::vector<uint8_t> found(held.size());
  ASSERT_TRUE(store->MultiGet(kTable, held, rows, found).ok());
  for (size_t i = 0; i < held.size(); ++i) {
    ASSERT_EQ(found[i], 1);
    EXPECT_EQ(std::memcmp(rows.data() + i * kRowBytes, model[held[i]].data(), kRowBytes), 0);
  }
  std::vector<Key> written{0};
  EXPECT_TRUE(
      store->MultiGet(kTable, written, {rows.data(), kRowBytes}, {found.data(), 1}).IsIOError());
  fault_env_.ClearRules();
  ExpectContent(*store, kTable, kRowBytes, model);
  ASSERT_TRUE(store->Checkpoint({}).ok());
  ReopenAndExpect(&store, model);
}

TEST_F(NativeWriteLogTest, PowerLossDropsTheLogAndGivesTheCheckpoint) {
  Model model;
  std::vector<Key> keys;
  auto store = OpenWithRows(1000, &keys, &model);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Checkpoint({}).ok());
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 1, nullptr).ok());
  ASSERT_TRUE(store->Sync().ok());  // the log is durable, but no checkpoint names it
  ASSERT_TRUE(store->Delete(kTable, std::vector<Key>{1, 2}).ok());
  ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
  ReopenAndExpect(&store, model);
  EXPECT_EQ(store->Stats().file_bytes % 4096, 0u);
}

// Random single-row overwrites in batches: through the log each leaf absorbs
// several rows per rewrite; without it each row rewrites its leaf.
TEST_F(NativeWriteLogTest, LogWritesLessThanRewritingLeaves) {
  double amp[2] = {0, 0};
  for (int with_log = 0; with_log < 2; ++with_log) {
    // Two merges (a log is frozen when full: 4000 entries) of about 3000
    // distinct rows into 1143 leaves.
    auto store = OpenWith(with_log ? 0.25 : 0, 4000);
    ASSERT_NE(store, nullptr);
    std::vector<Key> keys;
    for (Key k = 0; k < 8000; ++k) keys.push_back(k);
    ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, 0, nullptr).ok());
    ASSERT_TRUE(store->Checkpoint({}).ok());
    const RowStoreStats before = store->Stats();
    std::mt19937_64 rng(7);
    Model model;
    for (int batch = 0; batch < 20; ++batch) {
      std::vector<Key> some(400);
      for (Key& k : some) k = rng() % 8000;
      ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, some, batch + 1, &model).ok());
    }
    ASSERT_TRUE(store->Checkpoint({}).ok());
    const RowStoreStats after = store->Stats();
    amp[with_log] = double(after.bytes_written - before.bytes_written) /
                    double(after.user_bytes_written - before.user_bytes_written);
    EXPECT_EQ(after.live_rows, 8000u);
    EXPECT_LE(after.space_amp(), 1.5);
    std::vector<Key> probe;
    for (const auto& [k, v] : model) probe.push_back(k);
    std::vector<std::byte> rows(probe.size() * kRowBytes);
    std::vector<uint8_t> found(probe.size());
    ASSERT_TRUE(store->MultiGet(kTable, probe, rows, found).ok());
    for (size_t i = 0; i < probe.size(); ++i) {
      ASSERT_EQ(std::memcmp(rows.data() + i * kRowBytes, model[probe[i]].data(), kRowBytes), 0);
    }
    store.reset();
    std::error_code ignored;
    std::filesystem::remove_all(Options().dir, ignored);
  }
  EXPECT_LT(amp[1], 0.7 * amp[0]) << "with log " << amp[1] << ", without " << amp[0];
}

}  // namespace
}  // namespace strata::storage
