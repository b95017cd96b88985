// strata-test-labels: unit
// LogIndex against a std::unordered_map: inserts, overwrites and tombstones
// up to the budget, Find of present and absent keys (0 and 2^64-1
// included), Entries, Clear and Reset, and the DRAM bound per entry; erases
// (only of the value asked for) mixed with inserts in a full index, whose
// runs wrap around the array's end, and Rehash keeping every entry.
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

TEST(LogIndexTest, EraseAndRehashMatchMap) {
  std::mt19937_64 rng(8);
  LogIndex index;
  index.Reset(3000);
  std::unordered_map<Key, uint32_t> model;
  std::vector<Key> keys;
  uint32_t record = 0;
  for (int step = 0; step < 200000; ++step) {
    const bool full = model.size() == index.entries_max();
    if (!keys.empty() && (full || rng() % 2 == 0)) {
      const size_t at = rng() % keys.size();
      const Key key = keys[at];
      const uint32_t value = model.at(key);
      ASSERT_FALSE(index.Erase(key, value ^ LogIndex::kLogBit));  // another log's value stays
      ASSERT_TRUE(index.Erase(key, value)) << key;
      model.erase(key);
      keys[at] = keys.back();
      keys.pop_back();
    } else {
      // Extreme keys too; at load 0.8 some runs wrap around the array's end.
      const Key key = rng() % 4 == 0 ? ~Key{0} - rng() % 64 : rng();
      const uint32_t value =
          (record++ % LogIndex::kRecordsMax) | (rng() % 2 ? LogIndex::kLogBit : 0);
      auto it = model.find(key);
      ASSERT_EQ(index.Insert(key, value), it == model.end() ? LogIndex::kAbsent : it->second);
      if (it == model.end()) keys.push_back(key);
      model[key] = value;
    }
    ASSERT_EQ(index.size(), model.size());
  }
  ASSERT_FALSE(index.Erase(12345, 0));  // absent
  ExpectMatches(index, model, rng);
  index.Rehash(index.entries_max() * 2);
  EXPECT_EQ(index.entries_max(), 6000u);
  ExpectMatches(index, model, rng);
  index.Rehash(model.size());
  ExpectMatches(index, model, rng);
}

}  // namespace
}  // namespace strata::storage
