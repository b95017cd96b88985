// strata-test-timeout: 60
// Store::Open rejects bad row options of a table (checked once, by the T0
// table) and bad SSD-tier options as InvalidArgument naming the table and the
// field, and leaves the directory untouched; the SSD tier's write log option
// reaches the tier (its device byte counters show the difference).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/store.h"
#include "strata/types.h"

namespace strata {
namespace {

TEST(StoreOptionsTest, BadRowOptionsNameTableAndFieldAndChangeNothing) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("strata_store_options_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  StoreOptions o;
  o.dir = dir.string();
  o.device_rows_max = 1024;
  o.dram_rows_max = 1024;
  o.use_gpu = false;
  std::vector<TableOptions> tables(2);
  tables[0].name = "good";
  tables[1].name = "clicks";
  tables[1].optimizer.kind = Optimizer::kAdam;

  auto expect_rejected = [&](const std::vector<TableOptions>& t, const std::string& field) {
    auto r = Store::Open(o, t);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find("table 'clicks'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
    EXPECT_FALSE(std::filesystem::exists(dir / "ssd")) << msg;
  };
  auto bad = tables;
  bad[1].dim = kTableDimMax + 1;
  expect_rejected(bad, "dim");
  bad = tables;
  bad[1].optimizer.beta2 = 1.0f;
  expect_rejected(bad, "beta2");
  bad = tables;
  bad[1].init_scale = -1.0f;
  expect_rejected(bad, "init_scale");
  std::filesystem::remove_all(dir);
}

std::filesystem::path ScratchDir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("strata_store_options_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

StoreOptions HostOptions(const std::filesystem::path& dir, uint64_t device_rows, uint64_t dram_rows,
                         double write_log_fraction) {
  StoreOptions o;
  o.dir = dir.string();
  o.device_rows_max = device_rows;
  o.dram_rows_max = dram_rows;
  o.use_gpu = false;
  o.ssd_write_log_fraction = write_log_fraction;
  return o;
}

TEST(StoreOptionsTest, BadWriteLogFractionIsRejectedNamingTheField) {
  const std::filesystem::path dir = ScratchDir("log");
  for (double bad : {-0.1, kSsdWriteLogFractionMax + 1, std::nan("")}) {
    const StoreOptions o = HostOptions(dir, 1024, 1024, bad);
    auto r = Store::Open(o, std::vector<TableOptions>(1));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
    EXPECT_NE(r.status().message().find("ssd_write_log_fraction"), std::string::npos)
        << r.status().message();
    EXPECT_FALSE(std::filesystem::exists(dir)) << bad;
  }
}

// The same pushes through a store whose T1 holds a tenth of the rows, so most
// rows are written to the SSD tier: with the write log (the default) the tier
// appends them; with fraction 0 every row put rewrites its 4 KiB leaf. Both
// hand the tier the same row bytes; the leaf writes cost several times the
// device bytes (about 4 KiB per 64-byte row at first, the log about 1.1x the
// records plus one merge into the leaves at the checkpoint).
TEST(StoreOptionsTest, WriteLogFractionReachesTheSsdTier) {
  auto run = [](double fraction) {
    const std::filesystem::path dir = ScratchDir("bytes" + std::to_string(int(fraction * 100)));
    const StoreOptions o = HostOptions(dir, 256, 512, fraction);
    TableOptions t;
    t.name = "emb";
    t.dim = 16;
    t.optimizer.kind = Optimizer::kSgd;
    auto store = Store::Open(o, {t});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return StoreStats{};
    auto w = (*store)->RegisterWorker(-1);
    EXPECT_TRUE(w.ok());
    std::vector<Key> keys(256);
    std::vector<float> rows(keys.size() * t.dim), grads(keys.size() * t.dim, 0.5f);
    for (uint64_t round = 0; round < 40; ++round) {  // 10,240 distinct keys, 20x T1
      for (size_t i = 0; i < keys.size(); ++i) keys[i] = round * keys.size() + i;
      EXPECT_TRUE((*store)->Pull(*w, 0, keys, rows.data()).ok());
      EXPECT_TRUE((*store)->Push(*w, 0, keys, grads.data()).ok());
      EXPECT_TRUE((*store)->AdvanceClock(*w).ok());
    }
    EXPECT_TRUE((*store)->Checkpoint().ok());
    EXPECT_TRUE((*store)->Close().ok());
    StoreStats s = (*store)->Stats();
    std::filesystem::remove_all(dir);
    return s;
  };
  const StoreStats leaves = run(0);
  const StoreStats log = run(0.25);
  ASSERT_GT(leaves.ssd_user_bytes_written, 0u);
  // The same rows reach T2 (the engine's evictions do not depend on the tier's format).
  EXPECT_EQ(log.ssd_user_bytes_written, leaves.ssd_user_bytes_written);
  EXPECT_GE(log.ssd_bytes_written, log.ssd_user_bytes_written);
  EXPECT_LT(2 * log.ssd_bytes_written, leaves.ssd_bytes_written)
      << "log " << log.ssd_bytes_written << " leaves " << leaves.ssd_bytes_written;
}

}  // namespace
}  // namespace strata
