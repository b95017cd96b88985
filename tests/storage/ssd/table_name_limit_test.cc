// strata-test-timeout: 60
// A row store's table names may be longer than the Store's own limit
// (kTableNameBytesMax): row stores have accepted kRowStoreTableNameBytesMax
// bytes since format version 1, so one written with such a name must still
// reopen, and one byte more is refused.
#include <gtest/gtest.h>

#include <string>

#include "storage/ssd/limits.h"
#include "storage/ssd/row_store_factory.h"
#include "tests/storage/ssd/row_store_test_util.h"

namespace strata::storage {
namespace {

TEST(TableNameLimitTest, NativeStoreReopensWithTheLongestNameItAccepts) {
  static_assert(kRowStoreTableNameBytesMax > kTableNameBytesMax);
  strata::testing::ScratchDir dir;
  RowStoreOptions o;
  o.backend = SsdBackend::kNative;
  o.dir = dir.path() + "/store";
  const std::string name(kRowStoreTableNameBytesMax, 'n');
  constexpr uint32_t kRowBytes = 64;
  {
    auto store = OpenRowStore(o, {{0, name, kRowBytes}});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Checkpoint({}).ok());
  }
  auto reopened = OpenRowStore(o, {{0, name, kRowBytes}});
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->Tables().at(0).name, name);

  RowStoreOptions other = o;
  other.dir = dir.path() + "/other";
  auto too_long = OpenRowStore(other, {{0, name + "n", kRowBytes}});
  EXPECT_TRUE(too_long.status().IsInvalidArgument()) << too_long.status().ToString();
}

}  // namespace
}  // namespace strata::storage
