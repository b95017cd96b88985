// strata-test-labels: unit
// DramKeyClaims: claims of (table, key) by owner, against a model.
#include "storage/dram/dram_claims.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "storage/dram/dram_index.h"

namespace strata::storage {
namespace {

using Claim = DramKeyClaims::Claim;

// An Insert learns from one probe whether a key is new (claimed now), its
// own (an earlier duplicate in its batch) or another's (it must wait), so
// the answer must follow the owner exactly.
TEST(DramKeyClaimsTest, AddTellsNewOwnAndOtherClaimsApart) {
  DramKeyClaims c;
  const uint32_t a = c.NewOwner(), b = c.NewOwner();
  ASSERT_NE(a, b);
  EXPECT_EQ(c.Add(1, 5, DramKeyHash(5), a), Claim::kAdded);
  EXPECT_EQ(c.Add(1, 5, DramKeyHash(5), a), Claim::kOwn);
  EXPECT_EQ(c.Add(1, 5, DramKeyHash(5), b), Claim::kOther);
  EXPECT_EQ(c.Add(2, 5, DramKeyHash(5), b), Claim::kAdded);  // another table's key
  EXPECT_EQ(c.size(), 2u);
  c.Remove(1, 5, DramKeyHash(5));
  EXPECT_EQ(c.Add(1, 5, DramKeyHash(5), b), Claim::kAdded);
  c.Clear();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.Add(2, 5, DramKeyHash(5), a), Claim::kAdded);
}

// Ids in use are distinct; a returned id is handed out again before a new one.
TEST(DramKeyClaimsTest, OwnerIdsInUseAreDistinctAndReused) {
  DramKeyClaims c;
  std::set<uint32_t> in_use;
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(in_use.insert(c.NewOwner()).second);
  const uint32_t back = *in_use.begin();
  c.FreeOwner(back);
  in_use.erase(back);
  const uint32_t again = c.NewOwner();
  EXPECT_EQ(again, back);
  EXPECT_TRUE(in_use.insert(again).second);
}

// Random claims and removals (keys crowding a few homes, so removals shift
// runs back, and growth past the initial size) against a std::map: every
// claimed key answers with its owner's result, every removed one is new.
TEST(DramKeyClaimsTest, RandomClaimsAndRemovalsMatchModel) {
  DramKeyClaims c;
  std::vector<uint32_t> owners;
  for (int i = 0; i < 4; ++i) owners.push_back(c.NewOwner());
  std::map<std::pair<uint32_t, Key>, uint32_t> model;  // (table, key) -> owner
  std::mt19937_64 rng(5);
  for (int op = 0; op < 200000; ++op) {
    const uint32_t table = static_cast<uint32_t>(rng() % 3);
    const Key key = rng() % 2 == 0 ? rng() % 3000 : rng();
    const uint32_t owner = owners[rng() % owners.size()];
    auto it = model.find({table, key});
    if (rng() % 3 == 0 && it != model.end()) {
      c.Remove(table, key, DramKeyHash(key));
      model.erase(it);
      continue;
    }
    const Claim got = c.Add(table, key, DramKeyHash(key), owner);
    if (it == model.end()) {
      ASSERT_EQ(got, Claim::kAdded) << "op " << op;
      model[{table, key}] = owner;
    } else {
      ASSERT_EQ(got, it->second == owner ? Claim::kOwn : Claim::kOther) << "op " << op;
    }
    ASSERT_EQ(c.size(), model.size()) << "op " << op;
  }
  EXPECT_GT(c.capacity(), 1024u);  // grew
  for (const auto& [tk, owner] : model) {
    ASSERT_EQ(c.Add(tk.first, tk.second, DramKeyHash(tk.second), owner), Claim::kOwn);
  }
}

}  // namespace
}  // namespace strata::storage
