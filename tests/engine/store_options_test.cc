// strata-test-timeout: 60
// Store::Open rejects bad row options of a table (checked once, by the T0
// table) as InvalidArgument naming the table and the field, and leaves the
// directory untouched.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "strata/store.h"

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

}  // namespace
}  // namespace strata
