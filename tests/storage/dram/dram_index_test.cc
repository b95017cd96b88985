// strata-test-labels: unit
#include "storage/dram/dram_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <unordered_map>
#include <vector>

namespace strata::storage {
namespace {

// The probe's bucket scan (SSE2 where the compiler has it) against its
// definition, entry by entry: free entries whose stale tag equals the one
// sought, stash count bits and dirty flags set, several matches in a line.
TEST(DramIndexTest, MatchMaskMatchesItsDefinition) {
  using Entry = DramHashMap::Entry;
  std::mt19937_64 rng(7);
  alignas(64) std::array<Entry, DramHashMap::kBucketEntries> b{};
  for (int round = 0; round < 20000; ++round) {
    const uint32_t tag = static_cast<uint32_t>(rng()) & DramHashMap::kTagMask;
    const uint32_t want = tag << 1;
    for (Entry& e : b) {
      const uint64_t r = rng();
      // Mostly the sought tag or a near one, so matches and misses are common.
      const uint32_t t = (r & 3) == 0 ? static_cast<uint32_t>(r >> 8) & DramHashMap::kTagMask
                                      : tag ^ static_cast<uint32_t>((r >> 2) & 1);
      e.slot = (r >> 40) % 3 == 0 ? kDramNoSlot : static_cast<uint32_t>(r >> 32) % kDramNoSlot;
      e.tag_dirty = (t << 1) | static_cast<uint32_t>((r >> 4) & 1) |
                    (((r >> 5) & 1) != 0 ? DramHashMap::kCountBit : 0u);
    }
    uint32_t match = 0;
    for (uint32_t k = 0; k < DramHashMap::kBucketEntries; ++k) {
      if (b[k].slot != kDramNoSlot && ((b[k].tag_dirty >> 1) & DramHashMap::kTagMask) == tag) {
        match |= 1u << k;
      }
    }
    ASSERT_EQ(DramHashMap::MatchMask(b.data(), want), match) << "round " << round;
  }
  // The extremes of the fields: slot 0 and kDramNoSlot - 1, tags 0 and all
  // ones, the count bit in every entry.
  for (const uint32_t tag : {0u, DramHashMap::kTagMask}) {
    for (uint32_t k = 0; k < DramHashMap::kBucketEntries; ++k) {
      b[k].slot = k % 2 == 0 ? 0u : kDramNoSlot - 1;
      b[k].tag_dirty = DramHashMap::kCountBit | tag << 1 | (k & 1);
    }
    EXPECT_EQ(DramHashMap::MatchMask(b.data(), tag << 1), 0xffu);
    EXPECT_EQ(DramHashMap::MatchMask(b.data(), (tag ^ 1) << 1), 0u);
    b[3].slot = kDramNoSlot;
    EXPECT_EQ(DramHashMap::MatchMask(b.data(), tag << 1), 0xf7u);
  }
}

// Random inserts, dirty flags and erases against std::unordered_map, with
// growth past the 2 MiB threshold (buckets in a DramArena) and many erases of
// present keys (each of which may pull a stashed entry back into its bucket).
// The map keeps no keys: key_of (slot -> key) plays the slot headers.
TEST(DramIndexTest, HashMapMatchesModelThroughGrowthAndErase) {
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
    if (present) {
      ASSERT_EQ(dirty, dirty_of[k]) << "key " << k;
    }
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

// Candidate buckets crowded on purpose: 4 buckets of 8 entries (one group:
// each key's alternative is its home XOR 1, 2 or 3) filled up to the load
// bound (28 entries) by keys of few tags (so cuckoo moves run, chains of
// kicks fail and entries go to the stash, and a probe passes candidates
// whose key differs). After every insert, erase or dirty change every key
// of the model is found with its slot and flag and every other key is not
// (fails when a move loses an entry or sends it outside its two buckets,
// when a stashed entry's home is not counted, or when an erase leaves a
// count or a stashed entry behind). Once every key is erased again the
// stash is empty and every stash count is back at 0.
TEST(DramIndexTest, CuckooMovesAndStashMatchModel) {
  using Entry = DramHashMap::Entry;
  constexpr uint64_t kEntries = 4 * DramHashMap::kBucketEntries;
  alignas(64) std::array<Entry, kEntries> entries;
  entries.fill(Entry{kDramNoSlot, 0});
  DramHashMap map(entries.data(), kEntries);
  // Tags (the hash's low 32 bits >> 2): homes are tag * 4 >> 30, the
  // alternative's offset the tag's low 2 bits (3 when they are 0).
  const uint32_t bucket = 1u << 28;
  const std::array<uint32_t, 6> tags = {
      5, bucket + 9, 2 * bucket + 1, 3 * bucket + 2, 3 * bucket + 2, 3 * bucket + 77};
  constexpr Key kKeys = 64;
  std::vector<uint64_t> hash_of(kKeys);
  std::mt19937_64 rng(17);
  for (Key k = 0; k < kKeys; ++k) {
    // Half of the keys home in bucket 3; many keys share each tag.
    const uint32_t tag = rng() % 2 == 0 ? tags[3 + rng() % 3] : tags[rng() % tags.size()];
    hash_of[k] = (rng() << 32) | uint64_t{tag} << 2 | (rng() % 4);
  }
  std::unordered_map<Key, uint32_t> model;  // key -> slot
  std::unordered_map<uint32_t, Key> key_of;
  std::unordered_map<Key, bool> dirty_of;
  auto key_at = [&](uint32_t slot) { return key_of.at(slot); };
  uint32_t next_slot = 0;
  uint64_t stashed = 0;
  for (int op = 0; op < 100000; ++op) {
    const Key k = rng() % kKeys;
    const bool present = model.count(k) != 0;
    if (!present && !map.NeedsGrow()) {
      dirty_of[k] = rng() % 2;
      map.Insert(hash_of[k], next_slot, dirty_of[k]);
      key_of[next_slot] = k;
      model[k] = next_slot++;
    } else if (present && rng() % 3 == 0) {
      dirty_of[k] = !dirty_of[k];
      ASSERT_TRUE(map.SetDirty(hash_of[k], model[k], dirty_of[k]));
    } else if (present) {
      ASSERT_TRUE(map.Erase(hash_of[k], model[k])) << "op " << op << " key " << k;
      model.erase(k);
    } else {
      ASSERT_FALSE(map.Erase(hash_of[k], next_slot));
    }
    ASSERT_EQ(map.size(), model.size());
    stashed += map.stash_size() > 0 ? 1 : 0;
    for (Key q = 0; q < kKeys; ++q) {
      bool dirty = false;
      auto it = model.find(q);
      ASSERT_EQ(map.Find(q, hash_of[q], key_at, &dirty),
                it == model.end() ? kDramNoSlot : it->second)
          << "op " << op << " key " << q;
      if (it != model.end()) {
        ASSERT_EQ(dirty, dirty_of[q]) << "op " << op << " key " << q;
      }
    }
  }
  EXPECT_GT(stashed, 0u) << "the test never reached the stash";
  for (const auto& [k, slot] : std::unordered_map<Key, uint32_t>(model)) {
    ASSERT_TRUE(map.Erase(hash_of[k], slot));
  }
  ASSERT_EQ(map.size(), 0u);
  EXPECT_EQ(map.stash_size(), 0u);
  for (Key q = 0; q < kKeys; ++q) {
    EXPECT_EQ(map.StashCountAt(hash_of[q]), 0u) << "key " << q << ": a stash count left above 0";
  }
}

// Random keys up to the load bound and then a churn of erases and inserts
// (the cache's steady state): the cuckoo moves place all but a few of the
// entries in their buckets (the stash stays below one entry in 1,000: the
// groups' loads differ, and a group nearly full leaves entries over), and
// about two thirds of the keys are found in their home bucket's line.
TEST(DramIndexTest, CuckooKeepsStashSmallAtTheLoadBound) {
  using Entry = DramHashMap::Entry;
  constexpr uint64_t kLines = 128 * kDramIndexGroupBuckets;
  std::vector<Entry> entries(kLines * DramHashMap::kBucketEntries + DramHashMap::kBucketEntries,
                             Entry{kDramNoSlot, 0});
  auto* aligned =
      reinterpret_cast<Entry*>((reinterpret_cast<uintptr_t>(entries.data()) + 63) / 64 * 64);
  DramHashMap map(aligned, kLines * DramHashMap::kBucketEntries);
  std::mt19937_64 rng(1);
  std::vector<uint64_t> hashes;
  while (!map.NeedsGrow()) {
    hashes.push_back(DramKeyHash(rng()));
    map.Insert(hashes.back(), static_cast<uint32_t>(hashes.size() - 1), false);
  }
  EXPECT_LE(map.stash_size() * 1000, hashes.size());
  uint64_t stash_max = 0;
  for (int i = 0; i < 300000; ++i) {
    const uint32_t j = static_cast<uint32_t>(rng() % hashes.size());
    ASSERT_TRUE(map.Erase(hashes[j], j));
    hashes[j] = DramKeyHash(rng());
    map.Insert(hashes[j], j, false);
    stash_max = std::max<uint64_t>(stash_max, map.stash_size());
  }
  EXPECT_LE(stash_max * 1000, hashes.size());
  // Every key is found by its slot, most of them in their home line (the
  // lookup's fast path).
  uint64_t in_home = 0;
  for (uint32_t j = 0; j < hashes.size(); ++j) {
    bool dirty = false;
    ASSERT_EQ(map.Find(
                  j, hashes[j], [](uint32_t slot) { return Key{slot}; }, &dirty),
              j);
    const uint32_t tag = DramHashMap::TagOf(hashes[j]);
    const DramHashMap::Entry* home = map.HomeLine(tag);
    for (uint32_t match = DramHashMap::MatchMask(home, tag << 1); match != 0; match &= match - 1) {
      in_home += home[__builtin_ctz(match)].slot == j ? 1 : 0;
    }
  }
  EXPECT_GT(in_home * 10, hashes.size() * 6);
}

// More stashed entries share one home than its count holds (255): 300 keys
// of one tag (one home, one alternative: 16 entries) leave 284 in the
// stash; the count stays saturated, and every key is still found, before
// and after erases and inserts.
TEST(DramIndexTest, SaturatedStashCountKeepsEntriesReachable) {
  using Entry = DramHashMap::Entry;
  constexpr uint64_t kEntries = 64 * DramHashMap::kBucketEntries;  // 448 at the load bound
  alignas(64) std::array<Entry, kEntries> entries;
  entries.fill(Entry{kDramNoSlot, 0});
  DramHashMap map(entries.data(), kEntries);
  std::mt19937_64 rng(5);
  constexpr Key kKeys = 440;
  std::vector<uint64_t> hash_of(kKeys);
  std::vector<Key> key_of(kKeys);
  for (Key k = 0; k < kKeys; ++k) {
    const uint32_t tag = k < 300 ? 12345u : static_cast<uint32_t>(rng() % (1u << 30));
    hash_of[k] = (rng() << 32) | uint64_t{tag} << 2;
    map.Insert(hash_of[k], static_cast<uint32_t>(k), false);
    key_of[k] = k;
  }
  EXPECT_GE(map.stash_size(), 284u);
  EXPECT_EQ(map.StashCountAt(hash_of[0]), DramHashMap::kCountMax);
  auto key_at = [&](uint32_t slot) { return key_of[slot]; };
  auto check = [&](const std::vector<uint8_t>& present) {
    for (Key k = 0; k < kKeys; ++k) {
      bool dirty = false;
      ASSERT_EQ(map.Find(k, hash_of[k], key_at, &dirty),
                present[k] ? static_cast<uint32_t>(k) : kDramNoSlot)
          << "key " << k;
    }
  };
  std::vector<uint8_t> present(kKeys, 1);
  check(present);
  for (Key k = 0; k < kKeys; k += 2) {
    ASSERT_TRUE(map.Erase(hash_of[k], static_cast<uint32_t>(k)));
    present[k] = 0;
  }
  check(present);
  for (Key k = 0; k < kKeys; k += 2) {
    map.Insert(hash_of[k], static_cast<uint32_t>(k), true);
    present[k] = 1;
  }
  check(present);
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

// The stripes of an index are segments of one array, grown together: after
// 400,000 keys (past the 2 MiB arena threshold, through many growths, each
// moving every stripe) every key is found in its stripe with its slot, every
// stripe stays within its load bound, and the index's bytes are the one
// array's (equal segments) plus the stripes' headers.
TEST(DramIndexTest, StripesShareOneArrayGrownTogether) {
  DramIndex index(8, /*huge_pages=*/true);
  std::vector<Key> keys;
  std::mt19937_64 rng(9);
  auto key_at = [&](uint32_t slot) { return keys[slot]; };
  for (uint32_t slot = 0; slot < 400000; ++slot) {
    const Key k = slot % 3 == 0 ? Key{slot} : Key{rng()};
    keys.push_back(k);
    const uint64_t h = DramKeyHash(k);
    const uint32_t s = index.StripeOf(h);
    index.Reserve(s, 1);
    base::WriterLock lock(&index.stripe(s).mu);
    index.stripe(s).map.Insert(h, slot, slot % 2 == 0);
  }
  uint64_t segment = 0;
  {
    base::ReaderLock lock(&index.stripe(0).mu);
    segment = index.stripe(0).map.buckets_count();
  }
  uint64_t entries = 0;
  for (uint32_t s = 0; s < index.stripes(); ++s) {
    const DramIndex::Stripe& stripe = index.stripe(s);
    base::ReaderLock lock(&stripe.mu);
    EXPECT_EQ(stripe.map.buckets_count(), segment) << "stripe " << s;
    EXPECT_LE(stripe.map.size() * 8, stripe.map.buckets_count() * 7) << "stripe " << s;
    entries += stripe.map.size();
  }
  EXPECT_EQ(entries, keys.size());
  uint64_t stash_bytes = 0;
  for (uint32_t s = 0; s < index.stripes(); ++s) {
    base::ReaderLock lock(&index.stripe(s).mu);
    stash_bytes += index.stripe(s).map.stash_bytes();
  }
  EXPECT_EQ(index.bytes(),
            index.stripes() * (sizeof(DramIndex::Stripe) + segment * 8) + stash_bytes);
  for (uint32_t slot = 0; slot < keys.size(); ++slot) {
    const uint64_t h = DramKeyHash(keys[slot]);
    bool dirty = false;
    const DramIndex::Stripe& stripe = index.stripe(index.StripeOf(h));
    base::ReaderLock lock(&stripe.mu);
    ASSERT_EQ(stripe.map.Find(keys[slot], h, key_at, &dirty), slot);
    ASSERT_EQ(dirty, slot % 2 == 0) << "slot " << slot;
  }
}

}  // namespace
}  // namespace strata::storage
