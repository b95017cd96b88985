// strata-test-labels: unit
// LogIndex against a std::unordered_map: inserts, overwrites and tombstones
// up to the cycle's budget, Find of present and absent keys (0 and 2^64-1
// included), Entries, Clear and Reset, and the DRAM bound per entry.
#include "storage/ssd/log_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <unordered_map>

namespace strata::storage {
namespace {

void ExpectMatches(const LogIndex& index, const std::unordered_map<Key, uint32_t>& model,
                   std::mt19937_64& rng) {
  ASSERT_EQ(index.size(), model.size());
  for (const auto& [key, value] : model) {
    uint32_t got = 0;
    ASSERT_TRUE(index.Find(key, &got)) << key;
    ASSERT_EQ(got, value) << key;
  }
  for (int i = 0; i < 1000; ++i) {
    const Key key = rng();
    uint32_t got = 0;
    ASSERT_EQ(index.Find(key, &got), model.count(key) == 1) << key;
  }
  std::unordered_map<Key, uint32_t> listed;
  for (const LogIndex::Entry& e : index.Entries()) {
    ASSERT_TRUE(listed.emplace(e.key, e.value).second) << "key " << e.key << " listed twice";
  }
  ASSERT_EQ(listed, model);
}

TEST(LogIndexTest, MatchesMapUpToTheBudget) {
  std::mt19937_64 rng(5);
  LogIndex index;
  index.Reset(20000);
  EXPECT_LE(index.MemoryBytes(), 20000 * LogIndex::kSlotsPerEntry * 12 + 12);
  std::unordered_map<Key, uint32_t> model;
  uint32_t record = 0;
  const std::vector<Key> extremes{0, ~Key{0}, 1, ~Key{0} - 1};
  for (Key k : extremes) {
    EXPECT_EQ(index.Insert(k, record), LogIndex::kAbsent);
    model[k] = record++;
  }
  while (model.size() < index.entries_max()) {
    // Mostly new keys, some overwrites and tombstones of known ones.
    const size_t near = std::min<size_t>(16, model.size());
    Key key = rng() % 3 == 0 ? std::next(model.begin(), long(rng() % near))->first : rng();
    const uint32_t value = rng() % 5 == 0 ? LogIndex::kTombstone : record++;
    auto it = model.find(key);
    const uint32_t previous = it == model.end() ? LogIndex::kAbsent : it->second;
    ASSERT_EQ(index.Insert(key, value), previous);
    model[key] = value;
  }
  ExpectMatches(index, model, rng);
  index.Clear();
  model.clear();
  ExpectMatches(index, model, rng);
  index.Insert(7, 3);
  model[7] = 3;
  ExpectMatches(index, model, rng);
  index.Reset(10);
  model.clear();
  for (Key k = 0; k < 10; ++k) {
    index.Insert(k * 0x9E3779B97F4A7C15ull, uint32_t(k));
    model[k * 0x9E3779B97F4A7C15ull] = uint32_t(k);
  }
  ExpectMatches(index, model, rng);
}

TEST(LogIndexTest, EmptyIndexFindsNothing) {
  LogIndex index;
  uint32_t v = 0;
  EXPECT_FALSE(index.Find(0, &v));
  index.Reset(1);
  EXPECT_FALSE(index.Find(~Key{0}, &v));
  EXPECT_EQ(index.Insert(~Key{0}, 9), LogIndex::kAbsent);
  ASSERT_TRUE(index.Find(~Key{0}, &v));
  EXPECT_EQ(v, 9u);
}

}  // namespace
}  // namespace strata::storage
