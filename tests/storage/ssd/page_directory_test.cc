// strata-test-labels: unit
// PageDirectory against a std::map model of leaf ranges: Find, Next, NextLow
// and Replace (splits that overflow chunks), including keys 0 and 2^64-1.
#include "storage/ssd/page_directory.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace strata::storage {
namespace {

void ExpectMatches(const PageDirectory& dir, const std::map<uint64_t, uint32_t>& model,
                   std::mt19937_64& rng) {
  ASSERT_EQ(dir.leaf_count(), model.size());
  std::vector<uint64_t> probes{0, 1, ~uint64_t{0}, ~uint64_t{0} - 1};
  for (int i = 0; i < 200; ++i) probes.push_back(rng());
  for (const auto& [low, page] : model) probes.push_back(low);
  for (uint64_t m : probes) {
    auto it = std::prev(model.upper_bound(m));
    const auto h = dir.Find(m);
    ASSERT_EQ(dir.at(h).low_mixed, it->first) << m;
    ASSERT_EQ(dir.at(h).page, it->second) << m;
    uint64_t next = 0;
    const bool has_next = dir.NextLow(h, &next);
    ASSERT_EQ(has_next, std::next(it) != model.end());
    if (has_next) ASSERT_EQ(next, std::next(it)->first);
  }
  size_t n = 0;
  auto it = model.begin();
  for (auto h = dir.Begin(); dir.Valid(h); h = dir.Next(h), ++it, ++n) {
    ASSERT_EQ(dir.at(h).low_mixed, it->first);
  }
  ASSERT_EQ(n, model.size());
}

TEST(PageDirectoryTest, StartsWithOneEmptyLeafCoveringEveryKey) {
  PageDirectory dir;
  EXPECT_EQ(dir.leaf_count(), 1u);
  for (uint64_t m : {uint64_t{0}, uint64_t{12345}, ~uint64_t{0}}) {
    EXPECT_EQ(dir.at(dir.Find(m)).page, ssd::kNoPage);
  }
  uint64_t next;
  EXPECT_FALSE(dir.NextLow(dir.Begin(), &next));
}

TEST(PageDirectoryTest, SplitsMatchModel) {
  std::mt19937_64 rng(1);
  PageDirectory dir;
  std::map<uint64_t, uint32_t> model{{0, ssd::kNoPage}};
  uint32_t next_page = 0;
  for (int round = 0; round < 400; ++round) {
    // Split the leaf holding a random key into 1..40 leaves (large splits
    // overflow a chunk several times over).
    const uint64_t m = rng();
    auto it = std::prev(model.upper_bound(m));
    const uint64_t low = it->first;
    const uint64_t high = std::next(it) == model.end() ? ~uint64_t{0} : std::next(it)->first - 1;
    const int pieces = 1 + int(rng() % (round % 50 == 0 ? 3000 : 40));
    std::vector<ssd::LeafRecord> leaves{{low, next_page++, 1}};
    std::vector<uint64_t> lows;
    for (int p = 1; p < pieces; ++p)
      lows.push_back(low + 1 + rng() % std::max<uint64_t>(1, high - low));
    std::sort(lows.begin(), lows.end());
    lows.erase(std::unique(lows.begin(), lows.end()), lows.end());
    for (uint64_t l : lows) {
      if (l > low && l <= high) leaves.push_back({l, next_page++, 1});
    }
    dir.Replace(dir.Find(low), leaves);
    for (const auto& leaf : leaves) model[leaf.low_mixed] = leaf.page;
    if (round % 40 == 0) ExpectMatches(dir, model, rng);
  }
  ExpectMatches(dir, model, rng);
  // Rebuilt from its leaves, it is the same directory.
  const auto leaves = dir.Leaves();
  PageDirectory copy(leaves);
  ExpectMatches(copy, model, rng);
  EXPECT_GE(dir.MemoryBytes(), dir.leaf_count() * sizeof(ssd::LeafRecord));
}

}  // namespace
}  // namespace strata::storage
