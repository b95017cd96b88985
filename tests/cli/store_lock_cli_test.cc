// strata-test-labels: integration
// strata-test-timeout: 300
// One writer per store directory across processes: while this process holds
// a Store open, `strata replay` and `strata train` on its directory exit with
// the lock error naming the directory and this pid, and change nothing; the
// store here keeps working and checkpointing. A replay on a missing
// directory whose store cannot register its workers creates nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "strata/store.h"
#include "tests/cli/cli_runner.h"
#include "tests/util/source_files.h"

namespace strata::bench {
namespace {

using testing::RunCli;

constexpr const char* kReplayFlags = " --device-rows 64 --dram-rows 64 --dim 4";

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    names.insert(std::filesystem::relative(e.path(), dir).string());
  }
  return names;
}

class StoreLockCliTest : public testing::CliTraceTest,
                         public ::testing::WithParamInterface<SsdBackend> {
 protected:
  StoreLockCliTest() : CliTraceTest("--cardinalities 300,50 --batch-size 16 --batches 10") {}

  std::unique_ptr<Store> OpenHeld(const std::string& dir) {
    StoreOptions o;
    o.dir = dir;
    o.device_rows_max = 64;
    o.dram_rows_max = 64;
    o.use_gpu = false;
    o.ssd_backend = GetParam();
    TableOptions t;
    t.name = "held";
    t.dim = 4;
    auto store = Store::Open(o, {t});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // The store still pulls, pushes and checkpoints after the refusal.
  static void ExpectStillWorks(Store& store) {
    WorkerId w = *store.RegisterWorker();
    std::vector<Key> keys = {1, 2, 3};
    std::vector<float> rows(keys.size() * 4, 0.5f);
    ASSERT_TRUE(store.Push(w, 0, keys, rows.data()).ok());
    ASSERT_TRUE(store.Pull(w, 0, keys, rows.data()).ok());
    Status checkpointed = store.Checkpoint();
    EXPECT_TRUE(checkpointed.ok()) << checkpointed.ToString();
  }

  // `command` on the directory `held` has open exits with the lock error
  // naming the directory and this process, and changes nothing.
  static void ExpectRefused(const std::string& command, const std::string& dir, Store& held) {
    const std::set<std::string> before = Names(dir);
    std::string out;
    const int rc = RunCli(command, &out);
    EXPECT_NE(rc, 0) << out;
    EXPECT_NE(out.find("store directory " + dir + " is in use"), std::string::npos) << out;
    EXPECT_NE(out.find("process " + std::to_string(::getpid())), std::string::npos) << out;
    EXPECT_EQ(Names(dir), before);
    ExpectStillWorks(held);
  }
};

TEST_P(StoreLockCliTest, ReplayOnAnOpenStoreIsRefused) {
  const std::string dir = dir_.File("store");
  auto held = OpenHeld(dir);
  ASSERT_NE(held, nullptr);
  ExpectRefused("replay " + trace_ + " --dir " + dir + kReplayFlags, dir, *held);
}

TEST_P(StoreLockCliTest, TrainOnAnOpenStoreIsRefused) {
  const std::string dir = dir_.File("store");
  auto held = OpenHeld(dir);
  ASSERT_NE(held, nullptr);
  ExpectRefused("train " + strata::testing::CriteoSamplePath() +
                    " --rows-max 2000 --epochs 1 --no-gpu --dir " + dir,
                dir, *held);
  // Closed (the object still alive), the directory is free again.
  ASSERT_TRUE(held->Close().ok());
  EXPECT_NE(OpenHeld(dir), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreLockCliTest,
                         ::testing::Values(SsdBackend::kNative, SsdBackend::kRocksDb),
                         [](const ::testing::TestParamInfo<SsdBackend>& info) {
                           return std::string(info.param == SsdBackend::kNative ? "Native"
                                                                                : "RocksDb");
                         });

class ReplayDirCliTest : public testing::CliTraceTest {
 protected:
  ReplayDirCliTest() : CliTraceTest("--cardinalities 300,50 --batch-size 16 --batches 10") {}
};

TEST_F(ReplayDirCliTest, TooManyWorkersIsRefusedBeforeTheDirectoryIsCreated) {
  const std::string dir = dir_.File("store");
  std::string out;
  const int rc =
      RunCli("replay " + trace_ + " --dir " + dir + kReplayFlags + " --workers 300", &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find("300 workers"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir)) << out;
}

TEST_F(ReplayDirCliTest, FailedOpenUnderFaultsLeavesNoDirectory) {
  const std::string dir = dir_.File("store");
  std::string out;
  const int rc =
      RunCli("replay " + trace_ + " --dir " + dir + kReplayFlags + " --faults eio=1", &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_FALSE(std::filesystem::exists(dir)) << out;
  // A rerun is not refused as "not empty".
  EXPECT_EQ(RunCli("replay " + trace_ + " --dir " + dir + kReplayFlags, &out), 0) << out;
}

}  // namespace
}  // namespace strata::bench
