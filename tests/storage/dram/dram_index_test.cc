// strata-test-labels: unit
#include "storage/dram/dram_index.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace strata::storage {
namespace {

// Random inserts, dirty flags and erases against std::unordered_map, with
// growth past the 2 MiB threshold (buckets in a DramArena) and many erases of
// present keys, each of which shifts later entries of its probe run back.
// The map keeps no keys: key_of (slot -> key) plays the slot headers.
TEST(DramIndexTest, HashMapMatchesModelThroughGrowthAndBackwardShiftErase) {
  DramHashMap map(/*huge_pages=*/true);
  std::unordered_map<Key, uint32_t> model;
  std::unordered_map<uint32_t, Key> key_of;
  std::unordered_map<Key, bool> dirty_of;
  auto key_at = [&](uint32_t slot) { return key_of.at(slot); };
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
    bool dirty = false;
    ASSERT_EQ(map.Find(k, h, key_at, &dirty), present ? model[k] : kDramNoSlot) << "key " << k;
    if (present) ASSERT_EQ(dirty, dirty_of[k]) << "key " << k;
    if (op < 300000 && !present && rng() % 3 != 0) {
      dirty_of[k] = rng() % 2;
      map.Insert(h, next_slot, dirty_of[k]);
      key_of[next_slot] = k;
      model[k] = next_slot++;
    } else if (present && rng() % 4 == 0) {
      dirty_of[k] = !dirty_of[k];
      ASSERT_TRUE(map.SetDirty(h, model[k], dirty_of[k]));
    } else {
      ASSERT_EQ(map.Erase(h, present ? model[k] : next_slot), present) << "key " << k;
      model.erase(k);
    }
  }
  ASSERT_EQ(map.size(), model.size());
  for (auto [k, slot] : model) {
    bool dirty = false;
    ASSERT_EQ(map.Find(k, DramKeyHash(k), key_at, &dirty), slot);
    EXPECT_EQ(dirty, dirty_of[k]);
  }
  // 8-byte entries at a load of at most 7/8 (the map does not shrink).
  EXPECT_GE(map.bytes(), map.size() * 8 * 8 / 7);
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
