// strata-test-labels: unit
#include "storage/dram/dram_index.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace strata::storage {
namespace {

// Random inserts and erases against std::unordered_map, with growth past the
// 2 MiB threshold (buckets in a DramArena) and many erases of present keys,
// each of which shifts later entries of its probe run back.
TEST(DramIndexTest, HashMapMatchesModelThroughGrowthAndBackwardShiftErase) {
  DramHashMap map(/*huge_pages=*/true);
  std::unordered_map<Key, uint32_t> model;
  std::mt19937_64 rng(5);
  // Half the keys near 0 or 2^64-1 (so they repeat often), half anywhere.
  auto pick = [&] {
    switch (rng() % 4) {
      case 0:
        return Key{rng() % 512};
      case 1:
        return kKeyMax - rng() % 512;
      default:
        return Key{rng()};
    }
  };
  uint32_t next_slot = 0;
  for (int op = 0; op < 400000; ++op) {
    Key k = pick();
    uint64_t h = DramKeyHash(k);
    bool present = model.count(k) != 0;
    ASSERT_EQ(map.Find(k, h), present ? model[k] : kDramNoSlot) << "key " << k;
    if (op < 300000 && !present && rng() % 3 != 0) {
      map.Insert(k, h, next_slot);
      model[k] = next_slot++;
    } else {
      ASSERT_EQ(map.Erase(k, h), present) << "key " << k;
      model.erase(k);
    }
  }
  ASSERT_EQ(map.size(), model.size());
  for (auto [k, slot] : model) ASSERT_EQ(map.Find(k, DramKeyHash(k)), slot);
  EXPECT_GE(map.bytes(), map.size() * 16 * 4 / 3);
}

TEST(DramIndexTest, StripesSplitKeysByTopHashBits) {
  DramIndex one(1, false), many(64, false);
  EXPECT_EQ(one.StripeOf(~0ull), 0u);
  EXPECT_EQ(many.StripeOf(~0ull), 63u);
  EXPECT_EQ(many.StripeOf(1ull << 58), 1u);
  std::vector<int> per_stripe(64);
  for (Key k = 0; k < 64000; ++k) ++per_stripe[many.StripeOf(DramKeyHash(k))];
  for (int n : per_stripe) EXPECT_GT(n, 800);  // sequential keys spread evenly
}

}  // namespace
}  // namespace strata::storage
