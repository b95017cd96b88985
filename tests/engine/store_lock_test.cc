// strata-test-labels: integration
// strata-test-timeout: 300
// One Store per directory (StoreOptions.dir's LOCK file): a second opener is
// refused and changes nothing, the first keeps working and checkpointing;
// Close releases the directory (and the RocksDB database) while the closed
// object lives; every call after Close is refused; a failed Open of a new
// directory leaves it as it was; error_if_exists is checked under the lock.
// Across processes: tests/cli/store_lock_cli_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "strata/store.h"
#include "tests/engine/store_test_util.h"

namespace strata {
namespace {

using testing::ScanRows;
using testing::SgdTables;

constexpr uint32_t kDim = 4;

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    names.insert(std::filesystem::relative(e.path(), dir).string());
  }
  return names;
}

class StoreLockTest : public testing::StoreFixture {
 protected:
  // Pushes gradient `g` (every float) to keys [first, first + n) and adds it
  // to the model: SGD with learning rate 0.5 moves each float by -g/2.
  void PushKeys(Store& store, WorkerId w, Key first, uint64_t n, float g) {
    std::vector<Key> keys;
    for (Key k = first; k < first + n; ++k) keys.push_back(k);
    std::vector<float> rows(keys.size() * kDim);
    ASSERT_TRUE(Pull(store, w, 0, keys, rows.data()).ok());
    for (size_t i = 0; i < keys.size(); ++i) {
      auto& m = model_[keys[i]];
      if (m.empty()) m.assign(rows.begin() + i * kDim, rows.begin() + (i + 1) * kDim);
    }
    std::vector<float> grads(keys.size() * kDim, g);
    Status pushed = Push(store, w, 0, keys, grads.data());
    ASSERT_TRUE(pushed.ok()) << pushed.ToString();
    for (Key k : keys) {
      for (float& v : model_[k]) v -= 0.5f * g;
    }
  }

  void ExpectRowsMatchModel(Store& store) {
    std::map<Key, std::vector<float>> rows = ScanRows(store, 0);
    ASSERT_EQ(rows.size(), model_.size());
    for (const auto& [key, want] : model_) {
      ASSERT_TRUE(rows.count(key)) << "key " << key << " lost";
      for (uint32_t d = 0; d < kDim; ++d) EXPECT_FLOAT_EQ(rows[key][d], want[d]) << "key " << key;
    }
  }

  std::map<Key, std::vector<float>> model_;
};

TEST_P(StoreLockTest, SecondOpenIsRefusedAndTheFirstKeepsWorking) {
  const StoreOptions o = Options(16, 32);
  auto first = Open(o, SgdTables(1, kDim));
  ASSERT_NE(first, nullptr);
  WorkerId w = *first->RegisterWorker();
  PushKeys(*first, w, 0, 100, 1.0f);  // more than T0 and T1: rows on the SSD
  ASSERT_TRUE(first->Checkpoint().ok());
  PushKeys(*first, w, 50, 100, 2.0f);  // not checkpointed yet
  const std::set<std::string> before = Names(o.dir);

  for (int attempt = 0; attempt < 2; ++attempt) {
    auto second = Store::Open(o, SgdTables(1, kDim));
    ASSERT_TRUE(second.status().IsUnavailable()) << second.status().ToString();
    const std::string& msg = second.status().message();
    EXPECT_NE(msg.find(o.dir), std::string::npos) << msg;
    EXPECT_NE(msg.find("process " + std::to_string(::getpid())), std::string::npos) << msg;
  }
  EXPECT_EQ(Names(o.dir), before) << "a refused Open changed the directory";

  // The first store's pushes since its checkpoint survive, and it checkpoints.
  PushKeys(*first, w, 120, 40, 4.0f);
  Status checkpointed = first->Checkpoint();
  ASSERT_TRUE(checkpointed.ok()) << checkpointed.ToString();
  ExpectRowsMatchModel(*first);
  ASSERT_TRUE(first->Close().ok());
  first.reset();
  auto reopened = Open(o, SgdTables(1, kDim));
  ASSERT_NE(reopened, nullptr);
  ExpectRowsMatchModel(*reopened);
}

TEST_P(StoreLockTest, CloseReleasesTheDirectoryWhileTheObjectLives) {
  const StoreOptions o = Options(16, 32);
  for (int round = 0; round < 3; ++round) {  // as consecutive `with` blocks do
    auto store = Open(o, SgdTables(1, kDim));
    ASSERT_NE(store, nullptr);
    WorkerId w = *store->RegisterWorker();
    if (round > 0) ExpectRowsMatchModel(*store);
    PushKeys(*store, w, round * 10, 60, 1.0f);
    ASSERT_TRUE(store->Checkpoint().ok());
    const uint64_t pushes = store->Stats().pushes;
    ASSERT_TRUE(store->Close().ok());

    // Closed: every call is refused; Stats keeps what Close left.
    std::vector<Key> keys = {1};
    std::vector<float> row(kDim);
    EXPECT_TRUE(store->Pull(w, 0, keys, row.data()).IsFailedPrecondition());
    EXPECT_TRUE(store->Push(w, 0, keys, row.data()).IsFailedPrecondition());
    EXPECT_TRUE(store->AdvanceClock(w).IsFailedPrecondition());
    EXPECT_TRUE(store->CurrentClock(w).status().IsFailedPrecondition());
    EXPECT_TRUE(store->Checkpoint().IsFailedPrecondition());
    EXPECT_TRUE(store->Intent(w, 0, keys, 5, 6).IsFailedPrecondition());
    EXPECT_TRUE(store->RegisterWorker().status().IsFailedPrecondition());
    EXPECT_TRUE(store->ScanTable(0, [](Key, std::span<const float>) { return Status::Ok(); })
                    .IsFailedPrecondition());
    EXPECT_EQ(store->Stats().pushes, pushes);
    EXPECT_TRUE(store->Close().ok());
    // `store` still lives here: the next round opens the directory.
  }
}

TEST_P(StoreLockTest, ErrorIfExistsIsCheckedUnderTheLock) {
  StoreOptions o = Options(16, 32);
  o.error_if_exists = true;
  {
    auto store = Open(o, SgdTables(1, kDim));
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Close().ok());
  }
  const std::set<std::string> before = Names(o.dir);
  auto again = Store::Open(o, SgdTables(1, kDim));
  EXPECT_TRUE(again.status().IsFailedPrecondition()) << again.status().ToString();
  EXPECT_NE(again.status().message().find("not empty"), std::string::npos);
  EXPECT_EQ(Names(o.dir), before);
  o.error_if_exists = false;
  EXPECT_TRUE(Store::Open(o, SgdTables(1, kDim)).ok());
}

// Close while other threads pull, push, scan and read stats: each call
// returns OK or FailedPrecondition, none touches a released tier (the
// sanitizer builds check), and once Close returns the directory opens again.
TEST_P(StoreLockTest, CloseWhileCallsAreInFlight) {
  const StoreOptions o = Options(16, 32);
  auto store = Open(o, SgdTables(1, kDim));
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 4;
  std::atomic<int> started{0};
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      WorkerId w = *store->RegisterWorker();
      std::vector<Key> keys;
      for (Key k = 0; k < 40; ++k) keys.push_back(k * kThreads + t);
      std::vector<float> rows(keys.size() * kDim, 0.25f);
      bool counted = false;
      for (uint64_t i = 0;; ++i) {
        Status s = i % 4 == 0   ? Pull(*store, w, 0, keys, rows.data())
                   : i % 4 == 1 ? Push(*store, w, 0, keys, rows.data())
                   : i % 4 == 2 ? store->ScanTable(
                                      0, [](Key, std::span<const float>) { return Status::Ok(); })
                                : store->AdvanceClock(w);
        (void)store->Stats();
        if (!counted && i >= 8) {
          counted = true;
          started.fetch_add(1);
        }
        if (s.IsFailedPrecondition()) break;
        if (!s.ok()) {
          errors[t] = s.ToString();
          break;
        }
      }
      if (!counted) started.fetch_add(1);
    });
  }
  while (started.load() < kThreads) std::this_thread::yield();
  Status closed = store->Close();
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(closed.ok()) << closed.ToString();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  auto again = Store::Open(o, SgdTables(1, kDim));
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, StoreLockTest, testing::StoreCombinations(),
                         testing::StoreCombinationName);

// A host store of small tiers in `scratch`/store.
StoreOptions HostOptions(const strata::testing::ScratchDir& scratch) {
  StoreOptions o;
  o.dir = scratch.File("store");
  o.device_rows_max = 16;
  o.dram_rows_max = 32;
  o.use_gpu = false;
  return o;
}

TEST(StoreLockTest, FailedOpenOfANewDirectoryLeavesItAsItWas) {
  strata::testing::ScratchDir scratch;
  StoreOptions o = HostOptions(scratch);
  o.faults.eio_probability = 1.0;  // every SSD read and write fails
  auto failed = Store::Open(o, SgdTables(1, kDim));
  ASSERT_FALSE(failed.ok());
  EXPECT_FALSE(std::filesystem::exists(o.dir)) << "a failed Open left " << o.dir;
  std::filesystem::create_directory(o.dir);  // an empty directory stays empty
  ASSERT_FALSE(Store::Open(o, SgdTables(1, kDim)).ok());
  EXPECT_TRUE(Names(o.dir).empty());
  o.faults = {};
  auto opened = Store::Open(o, SgdTables(1, kDim));
  EXPECT_TRUE(opened.ok()) << opened.status().ToString();
}

TEST(StoreLockTest, FailedOpenOfAnExistingStoreRemovesNothing) {
  strata::testing::ScratchDir scratch;
  const StoreOptions o = HostOptions(scratch);
  {
    auto store = Store::Open(o, SgdTables(1, kDim));
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Close().ok());
  }
  const std::set<std::string> before = Names(o.dir);
  auto mismatch = Store::Open(o, SgdTables(2, kDim));  // tables differ from the stored ones
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(Names(o.dir), before);
}

}  // namespace
}  // namespace strata
