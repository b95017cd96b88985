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
  o.ssd_format_version = 1;  // the write log is format 1's
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

TEST(StoreOptionsTest, BadSsdFormatVersionOrSegmentBytesIsRejectedNamingTheField) {
  const std::filesystem::path dir = ScratchDir("format");
  for (uint32_t bad : {0u, 3u}) {
    StoreOptions o = HostOptions(dir, 1024, 1024, 0.25);
    o.ssd_format_version = bad;
    auto r = Store::Open(o, std::vector<TableOptions>(1));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
    EXPECT_NE(r.status().message().find("ssd_format_version"), std::string::npos)
        << r.status().message();
    EXPECT_FALSE(std::filesystem::exists(dir)) << bad;
  }
  for (uint64_t bad :
       {uint64_t{0}, uint64_t{32} << 10, (uint64_t{64} << 10) + 1, uint64_t{128} << 20}) {
    StoreOptions o = HostOptions(dir, 1024, 1024, 0.25);
    o.ssd_format_version = 2;
    o.ssd_segment_bytes = bad;
    auto r = Store::Open(o, std::vector<TableOptions>(1));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("ssd_segment_bytes"), std::string::npos)
        << r.status().message();
    EXPECT_FALSE(std::filesystem::exists(dir)) << bad;
  }
  StoreOptions o = HostOptions(dir, 1024, 1024, 0.25);
  o.ssd_format_version = 2;
  o.ssd_index = static_cast<SsdIndex>(9);
  auto r = Store::Open(o, std::vector<TableOptions>(1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ssd_index"), std::string::npos) << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir));
  o.ssd_index = SsdIndex::kRanges;
  o.ssd_range_bits = 13;
  r = Store::Open(o, std::vector<TableOptions>(1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ssd_range_bits = 13"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(std::filesystem::exists(dir));
  o.ssd_range_bits = 2;
  for (double bad : {0.0, -1.0, 8.5, std::nan("")}) {
    o.ssd_merge_log_fraction = bad;
    r = Store::Open(o, std::vector<TableOptions>(1));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("ssd_merge_log_fraction"), std::string::npos)
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

// StoreOptions::ssd_format_version reaches the tier: the same training
// pushes through a tier of format 1 and of format 2 (its log file in the
// tier directory, no leaf pages), checkpointed, closed and reopened, give
// the same rows, with either DRAM index of format 2 (StoreOptions::ssd_index).
TEST(StoreOptionsTest, SsdFormatVersion2ReachesTheTierAndGivesTheSameRows) {
  TableOptions t;
  t.name = "emb";
  t.dim = 16;
  t.optimizer.kind = Optimizer::kSgd;
  constexpr uint64_t kRounds = 20, kBatch = 256;
  auto run = [&](uint32_t format, SsdIndex index) {
    const std::filesystem::path dir = ScratchDir("format" + std::to_string(format));
    StoreOptions o = HostOptions(dir, 256, 512, 0.25);
    o.ssd_format_version = format;
    o.ssd_index = index;
    std::vector<Key> keys(kBatch);
    std::vector<float> rows(keys.size() * t.dim), grads(keys.size() * t.dim, 0.5f);
    {
      auto store = Store::Open(o, {t});
      EXPECT_TRUE(store.ok()) << store.status().ToString();
      if (!store.ok()) return std::vector<float>{};
      auto w = (*store)->RegisterWorker(-1);
      EXPECT_TRUE(w.ok());
      for (uint64_t round = 0; round < kRounds; ++round) {
        for (size_t i = 0; i < keys.size(); ++i) keys[i] = (round * keys.size() + i) % 3000;
        EXPECT_TRUE((*store)->Pull(*w, 0, keys, rows.data()).ok());
        EXPECT_TRUE((*store)->Push(*w, 0, keys, grads.data()).ok());
        EXPECT_TRUE((*store)->AdvanceClock(*w).ok());
      }
      EXPECT_TRUE((*store)->Checkpoint().ok());
      EXPECT_TRUE((*store)->Close().ok());
    }
    bool log_file = false, page_file = false;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      log_file = log_file || (name.ends_with(".log") && name.find('-') != std::string::npos);
      page_file = page_file || name.ends_with(".pages");
    }
    EXPECT_EQ(log_file, format == 2);
    EXPECT_EQ(page_file, format == 1);
    std::vector<float> all;
    auto store = Store::Open(o, {t});
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return all;
    auto w = (*store)->RegisterWorker(-1);
    EXPECT_TRUE(w.ok());
    for (Key start = 0; start < 3000; start += kBatch) {
      for (size_t i = 0; i < keys.size(); ++i) keys[i] = (start + i) % 3000;
      EXPECT_TRUE((*store)->Pull(*w, 0, keys, rows.data()).ok());
      all.insert(all.end(), rows.begin(), rows.end());
    }
    EXPECT_TRUE((*store)->Close().ok());
    std::filesystem::remove_all(dir);
    return all;
  };
  const std::vector<float> v1 = run(1, SsdIndex::kCompact);
  const std::vector<float> v2 = run(2, SsdIndex::kCompact);
  const std::vector<float> v2_exact = run(2, SsdIndex::kExact);
  ASSERT_FALSE(v1.empty());
  EXPECT_EQ(v1, v2);
  EXPECT_EQ(v1, v2_exact);
}

}  // namespace
}  // namespace strata
