// strata-test-labels: unit
#include "bench/sweep.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/bench/model_store.h"
#include "tests/util/scratch_dir.h"

namespace strata::bench {
namespace {

using strata::testing::ScratchDir;

TEST(SweepTest, GridRowsFloorsAndFiles) {
  ScratchDir dir;
  auto config = ParseSweepConfig(R"({
    "workloads": [{"name": "w", "preset": "criteo-kaggle", "scale": 0.0005,
                   "batch_size": 16, "batches": 12}],
    "device_rows": [200], "dram_rows": [300, 600],
    "lookahead": [0, 2], "fallback": ["lru", "lfu"], "dim": 4})");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  StoreOpener open = [](const StoreOptions& o,
                        const std::vector<TableOptions>& tables) -> Result<std::unique_ptr<Store>> {
    auto s = std::make_unique<testing::ModelStore>(tables, testing::ModelStore::Knobs{}, o);
    return std::unique_ptr<Store>(std::move(s));
  };
  auto rows = RunSweep(*config, dir.File("out"), open, {});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 8u);  // 2 dram x 2 fallback x 2 lookahead
  for (const auto& r : *rows) {
    EXPECT_EQ(r.replay.batches, 12u);
    EXPECT_LE(r.opt_misses, r.horizon_misses);
    EXPECT_LE(r.opt_misses, r.lru_misses);
    EXPECT_GE(r.opt_misses, r.compulsory_misses);
  }
  std::ifstream csv(dir.File("out/sweep.csv"));
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 9);  // header + 8
  EXPECT_TRUE(std::filesystem::exists(dir.File("out/sweep.json")));
  EXPECT_TRUE(std::filesystem::exists(dir.File("out/w.trace")));
}

// compute_us is a grid dimension: each value is a replay of its own whose
// batches take at least that long, and a CSV column.
TEST(SweepTest, ComputeTimeIsAGridDimension) {
  ScratchDir dir;
  auto config = ParseSweepConfig(R"({
    "workloads": [{"name": "w", "preset": "criteo-kaggle", "scale": 0.0005,
                   "batch_size": 16, "batches": 12}],
    "device_rows": [200], "dram_rows": [300], "lookahead": [2],
    "compute_us": [0, 2000], "device_share_growth": 0.5, "dim": 4, "dram_shards": 2})");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->device_share_growth, 0.5);
  EXPECT_EQ(config->dram_shards, 2u);
  StoreOpener open = [](const StoreOptions& o,
                        const std::vector<TableOptions>& tables) -> Result<std::unique_ptr<Store>> {
    EXPECT_EQ(o.device_share_growth_max, 0.5);
    EXPECT_EQ(o.dram_shards, 2u);
    auto s = std::make_unique<testing::ModelStore>(tables, testing::ModelStore::Knobs{}, o);
    return std::unique_ptr<Store>(std::move(s));
  };
  auto rows = RunSweep(*config, dir.File("out"), open, {});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].compute_us, 0u);
  EXPECT_EQ((*rows)[1].compute_us, 2000u);
  EXPECT_GE((*rows)[1].replay.elapsed_s, 12 * 0.002);  // 12 batches of at least 2 ms
  std::ifstream csv(dir.File("out/sweep.csv"));
  std::string header, line;
  ASSERT_TRUE(std::getline(csv, header));
  EXPECT_NE(header.find(",compute_us"), std::string::npos);
  const auto fields = [](const std::string& l) { return std::count(l.begin(), l.end(), ','); };
  while (std::getline(csv, line)) EXPECT_EQ(fields(line), fields(header)) << line;
  EXPECT_TRUE(ParseSweepConfig(R"({"workloads": [{"name": "w"}], "device_rows": [1],
                                   "dram_rows": [1], "lookahead": [2], "compute_us": []})")
                  .status()
                  .IsInvalidArgument());
}

TEST(SweepTest, ConfigErrorsNameTheKey) {
  auto typo = ParseSweepConfig(R"({"workloads": [{"name": "w"}], "device_rows": [1],
                                   "dram_rows": [1], "lookahed": [2]})");
  EXPECT_NE(typo.status().message().find("'lookahed'"), std::string::npos);
  auto missing = ParseSweepConfig(R"({"workloads": [], "device_rows": [1]})");
  EXPECT_TRUE(missing.status().IsInvalidArgument());
  EXPECT_TRUE(ParseSweepConfig("{").status().IsInvalidArgument());
}

TEST(SweepTest, NegativeFractionalOrHugeNumbersAreRefused) {
  // A config with one field replaced.
  auto config = [](const std::string& key, const std::string& value,
                   const std::string& workload_field = "") {
    nlohmann::json j = nlohmann::json::parse(R"({"workloads": [{"name": "w"}],
        "device_rows": [300], "dram_rows": [400], "lookahead": [2]})");
    if (!key.empty()) j[key] = nlohmann::json::parse(value);
    if (!workload_field.empty()) j["workloads"][0][workload_field] = nlohmann::json::parse(value);
    return ParseSweepConfig(j.dump());
  };
  ASSERT_TRUE(config("", "").ok());
  for (auto [key, value] : {std::pair{"lookahead", "[2, -1]"},
                            {"device_rows", "[-5]"},
                            {"dram_rows", "[1.5]"},
                            {"compute_us", "[-1]"},
                            {"lookahead", "[100000]"},
                            {"device_rows", "[1e30]"},
                            {"workers", "-1"},
                            {"dim", "-1"},
                            {"dram_shards", "-1"},
                            {"dram_shards", "3"},
                            {"dram_shards", "128"}}) {
    auto r = config(key, value);
    ASSERT_TRUE(r.status().IsInvalidArgument()) << key << " " << value;
  }
  EXPECT_NE(config("dram_shards", "6").status().message().find("dram_shards 6"), std::string::npos);
  for (auto [field, value] : {std::pair{"workers", "-1"},
                              {"batches", "-1"},
                              {"batch_size", "4294967296"},
                              {"seed", "0.5"}}) {
    auto r = config("", value, field);
    ASSERT_TRUE(r.status().IsInvalidArgument()) << field << " " << value;
    EXPECT_NE(r.status().message().find(std::string("workloads[0].") + field), std::string::npos)
        << r.status().ToString();
  }
}

}  // namespace
}  // namespace strata::bench
