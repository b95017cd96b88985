// strata-test-labels: unit
#include "trace/key_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace strata::trace {
namespace {

TEST(KeyIndexTest, MatchesAMapThroughGrowth) {
  KeyIndex index(4);
  std::map<std::pair<TableId, Key>, uint32_t> model;
  std::mt19937_64 rng(9);
  for (int i = 0; i < 50000; ++i) {
    const TableId t = static_cast<TableId>(rng() % 3);
    const Key k = (i % 7 == 0) ? ~Key{0} - rng() % 3 : rng() % 20000;
    bool inserted = false;
    const uint32_t id = index.Insert(t, k, &inserted);
    auto [it, fresh] = model.emplace(std::make_pair(t, k), static_cast<uint32_t>(model.size()));
    EXPECT_EQ(inserted, fresh);
    ASSERT_EQ(id, it->second);
  }
  EXPECT_EQ(index.size(), model.size());
  for (const auto& [tk, id] : model) {
    EXPECT_EQ(index.Find(tk.first, tk.second), id);
    EXPECT_EQ(index.TableOf(id), tk.first);
    EXPECT_EQ(index.KeyOf(id), tk.second);
  }
  EXPECT_EQ(index.Find(5, 1), KeyIndex::kNone);
  // Same key in another table is another row.
  EXPECT_NE(index.Insert(7, 0), index.Insert(8, 0));
}

}  // namespace
}  // namespace strata::trace
