// strata-test-labels: unit
// Native write logs merged in the background: a merge held mid-way (after
// its first round of leaves switched) by a hook, while gets see the newest
// row of every key (active log, frozen log, leaves), puts and deletes go on
// and are not lost, and puts that fill the log index wait for the merge's
// next round (backpressure) while gets still run; a crash with a frozen log
// half merged reopens to the last checkpoint exactly; a writer and a reader
// racing through many merges never see a row go back to an older version.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "io/fault_env.h"
#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/row_store_test_util.h"

namespace strata::storage {
namespace {

using testing::ExpectContent;
using testing::MakeRow;
using testing::Model;
using testing::PutRows;

constexpr uint32_t kRowBytes = 512;
constexpr TableId kTable = 5;
constexpr uint64_t kIndexEntries = 10000;  // the log index's budget; a full log freezes

// The hook of the store: once armed, holds the merge at its `hold_at`-th
// round until Release(), and counts puts that wait for a merge
// (backpressure).
class MergeGate {
 public:
  explicit MergeGate(int hold_at) : hold_at_(hold_at) {}
  void Arm() {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
  }
  void operator()(LogMergePoint point) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!armed_) return;
    if (point == LogMergePoint::kBackpressure) {
      ++backpressure_;
      cv_.notify_all();
      return;
    }
    if (point != LogMergePoint::kMergeRound || ++rounds_ != hold_at_) return;
    held_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return released_; });
  }
  void WaitHeld() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return held_; });
  }
  // Waits until more than `seen` puts waited for a merge.
  void WaitBackpressure(int seen) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return backpressure_ > seen; });
  }
  int backpressure() {
    std::lock_guard<std::mutex> lock(mu_);
    return backpressure_;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int rounds() {
    std::lock_guard<std::mutex> lock(mu_);
    return rounds_;
  }

 private:
  const int hold_at_;
  std::mutex mu_;
  std::condition_variable cv_;
  int rounds_ = 0;
  int backpressure_ = 0;
  bool armed_ = false;
  bool held_ = false;
  bool released_ = false;
};

// Every model key reads its row, `absent` keys are missing: MultiGet only
// (Scan merges the logs, which a held merge would block).
void ExpectGets(RowStore& store, const Model& model, const std::vector<Key>& absent = {}) {
  std::vector<Key> keys;
  for (const auto& [k, v] : model) keys.push_back(k);
  keys.insert(keys.end(), absent.begin(), absent.end());
  std::vector<std::byte> rows(keys.size() * kRowBytes);
  std::vector<uint8_t> found(keys.size());
  ASSERT_TRUE(store.MultiGet(kTable, keys, rows, found).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto it = model.find(keys[i]);
    ASSERT_EQ(found[i], it != model.end() ? 1 : 0) << "key " << keys[i];
    if (it == model.end()) continue;
    ASSERT_EQ(std::memcmp(rows.data() + i * kRowBytes, it->second.data(), kRowBytes), 0)
        << "row of key " << keys[i];
  }
}

std::vector<Key> Range(Key begin, Key end) {
  std::vector<Key> keys;
  for (Key k = begin; k < end; ++k) keys.push_back(k);
  return keys;
}

class NativeBackgroundMergeTest : public testing::NativeRowStoreFixture {
 protected:
  NativeBackgroundMergeTest() : NativeRowStoreFixture(kTable, kRowBytes) {}

  // A log index of kIndexEntries entries (the fraction is negligible), with
  // `gate` as the merge hook when given.
  std::unique_ptr<RowStore> OpenGated(MergeGate* gate) {
    RowStoreOptions o = Options();
    o.write_log_fraction = 1e-6;
    o.write_log_entries_min = kIndexEntries;
    if (gate != nullptr) o.log_merge_hook = [gate](LogMergePoint p) { (*gate)(p); };
    auto store = OpenRowStore(o, {{kTable, "emb", kRowBytes}});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // 40000 rows in about 5700 leaves (straight to the leaves: larger than the
  // log index), checkpointed; then 10000 rows in the log (keys 0..9999,
  // version 1, a full index: about 4700 leaves to rewrite) and one more
  // batch, which freezes it and waits for the background merge's first
  // round (of at most 4096 leaves), after which the merge holds.
  std::unique_ptr<RowStore> OpenWithHeldMerge(MergeGate* gate, Model* model) {
    auto store = OpenGated(gate);
    if (store == nullptr) return nullptr;
    EXPECT_TRUE(PutRows(*store, kTable, kRowBytes, Range(0, 40000), 0, model).ok());
    EXPECT_TRUE(store->Checkpoint({}).ok());
    gate->Arm();
    for (Key k = 0; k < 10000; k += 2000) {
      EXPECT_TRUE(PutRows(*store, kTable, kRowBytes, Range(k, k + 2000), 1, model).ok());
    }
    EXPECT_TRUE(PutRows(*store, kTable, kRowBytes, Range(10000, 11000), 1, model).ok());
    gate->WaitHeld();
    return store;
  }
};

TEST_F(NativeBackgroundMergeTest, GetsAndPutsDuringAMergeSeeTheNewestRows) {
  MergeGate gate(1);
  Model model;
  auto store = OpenWithHeldMerge(&gate, &model);
  ASSERT_NE(store, nullptr);
  // Keys 0..9999: most merged into leaves, the rest only in the frozen log;
  // 10000..10999 in the active log; the rest in leaves only.
  ExpectGets(*store, model);
  // Overwrite and delete keys of the frozen log: the active log wins.
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, Range(0, 1000), 2, &model).ok());
  ASSERT_TRUE(store->Delete(kTable, Range(1000, 1100)).ok());
  for (Key k = 1000; k < 1100; ++k) model.erase(k);
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, Range(100000, 100100), 2, &model).ok());  // new
  ExpectGets(*store, model, Range(1000, 1100));
  EXPECT_EQ(gate.rounds(), 1);  // the merge is still held

  // 20000 new rows: more than the log index holds, so a put must wait for
  // the merge to free room.
  std::atomic<bool> done{false};
  Status waited;
  const int waits_before = gate.backpressure();
  std::thread putter([&] {
    for (Key k = 200000; k < 220000 && waited.ok(); k += 500) {
      waited = PutRows(*store, kTable, kRowBytes, Range(k, k + 500), 4, nullptr);
    }
    done = true;
  });
  gate.WaitBackpressure(waits_before);
  EXPECT_FALSE(done.load());  // it waits for a round of the held merge
  ExpectGets(*store, model);  // gets do not wait for it
  gate.Release();
  putter.join();
  ASSERT_TRUE(waited.ok()) << waited.ToString();
  for (Key k = 200000; k < 220000; ++k) model[k] = MakeRow(k, 4, kRowBytes);
  EXPECT_GE(gate.rounds(), 2);  // the merge went on before the puts did
  ExpectGets(*store, model, Range(1000, 1100));
  ExpectContent(*store, kTable, kRowBytes, model);
  ASSERT_TRUE(store->Checkpoint({}).ok());
  EXPECT_EQ(store->Stats().live_rows, model.size());
  store.reset();
  store = OpenGated(nullptr);
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, model);
}

TEST_F(NativeBackgroundMergeTest, CrashDuringAMergeReopensToTheCheckpoint) {
  MergeGate gate(1);
  Model model;
  auto store = OpenWithHeldMerge(&gate, &model);
  ASSERT_NE(store, nullptr);
  Model checkpointed;
  for (Key k = 0; k < 40000; ++k) checkpointed[k] = MakeRow(k, 0, kRowBytes);
  // The first round's leaves are written and switched; make them and both
  // logs durable, so the crash keeps them on disk beside the checkpoint.
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, Range(0, 100), 2, &model).ok());
  ASSERT_TRUE(store->Sync().ok());
  ExpectGets(*store, model);
  // Power loss now; nothing the store writes after it reaches the disk.
  ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
  io::FaultRule rule;
  rule.op = io::FaultOp::kWrite;
  ASSERT_TRUE(fault_env_.AddRule(rule).ok());
  gate.Release();  // the rest of the merge fails to write
  store.reset();
  fault_env_.ClearRules();
  ASSERT_TRUE(fault_env_.DropUnsyncedWrites().ok());
  store = OpenGated(nullptr);
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, checkpointed);
  // And the store goes on: the merge's pages were free ones, reused now.
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, Range(0, 6000), 5, &checkpointed).ok());
  ASSERT_TRUE(store->Checkpoint({}).ok());
  store.reset();
  store = OpenGated(nullptr);
  ASSERT_NE(store, nullptr);
  ExpectContent(*store, kTable, kRowBytes, checkpointed);
}

// A writer puts rising versions of 3000 keys through many background merges
// (a log index of 2000 entries) while a reader checks that every row it reads is
// whole and never older than one it read before; then the content is the
// writer's last rows.
TEST_F(NativeBackgroundMergeTest, ConcurrentGetsNeverSeeOlderRows) {
  RowStoreOptions o = Options();
  o.write_log_fraction = 1e-6;
  o.write_log_entries_min = 2000;
  auto opened = OpenRowStore(o, {{kTable, "emb", kRowBytes}});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<RowStore> store = std::move(opened).value();
  constexpr Key kKeys = 3000;
  Model model;
  ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, Range(0, kKeys), 0, &model).ok());
  std::atomic<bool> writing{true};
  std::thread reader([&] {
    std::vector<uint64_t> seen(kKeys, 0);
    std::mt19937_64 rng(11);
    std::vector<Key> keys(256);
    std::vector<std::byte> rows(keys.size() * kRowBytes);
    std::vector<uint8_t> found(keys.size());
    while (writing.load()) {
      for (Key& k : keys) k = rng() % kKeys;
      ASSERT_TRUE(store->MultiGet(kTable, keys, rows, found).ok());
      for (size_t i = 0; i < keys.size(); ++i) {
        ASSERT_EQ(found[i], 1) << "key " << keys[i];
        uint64_t version = 0;
        std::memcpy(&version, rows.data() + i * kRowBytes + 8, 8);
        const testing::Row want = MakeRow(keys[i], version, kRowBytes);
        ASSERT_EQ(std::memcmp(rows.data() + i * kRowBytes, want.data(), kRowBytes), 0)
            << "key " << keys[i];
        ASSERT_GE(version, seen[keys[i]]) << "key " << keys[i] << " went back";
        seen[keys[i]] = version;
      }
    }
  });
  std::mt19937_64 rng(12);
  for (uint64_t version = 1; version <= 60; ++version) {
    std::vector<Key> keys(300);
    for (Key& k : keys) k = rng() % kKeys;
    ASSERT_TRUE(PutRows(*store, kTable, kRowBytes, keys, version, &model).ok());
  }
  writing = false;
  reader.join();
  ExpectContent(*store, kTable, kRowBytes, model);
}

}  // namespace
}  // namespace strata::storage
