// strata-test-labels: unit
#include "engine/intent_index.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>

namespace strata::engine {
namespace {

using Unpinned = std::set<std::pair<TableId, Key>>;

struct Recorder {
  Unpinned unpinned;
  std::map<std::pair<TableId, Key>, Clock> next;
  void Expire(IntentIndex& index, WorkerId w, Clock clock) {
    index.Expire(
        w, clock,
        [&](TableId t, Key k) {
          unpinned.insert({t, k});
        },
        [&](TableId t, Key k, Clock c) {
          next[{t, k}] = c;
        });
  }
};

TEST(IntentIndexTest, WindowEdgesDueAndExpire) {
  IntentIndex index(1);
  std::vector<Key> keys = {5, 0, ~Key{0}, 5};
  index.Add(0, 0, keys, 3, 4);
  EXPECT_EQ(index.TrackedKeys(), 3u);    // duplicates folded
  EXPECT_TRUE(index.Due(0, 3).empty());  // start 3 is not < 3
  auto due = index.Due(0, 4);
  ASSERT_EQ(due.size(), 1u);
  index.MarkActed(due[0]);
  EXPECT_EQ(index.ActedCount(0, ~Key{0}), 1u);
  EXPECT_TRUE(index.Due(0, 100).empty());  // acted windows are not due again
  Recorder rec;
  rec.Expire(index, 0, 3);  // clock 3: window [3,4) is active, not expired
  EXPECT_TRUE(rec.unpinned.empty());
  rec.Expire(index, 0, 4);  // clock 4: expired
  EXPECT_EQ(rec.unpinned.size(), 3u);
  EXPECT_EQ(index.NextUse(0, 5), kClockNever);
  EXPECT_EQ(index.TrackedKeys(), 0u);
  EXPECT_EQ(index.PendingWindows(), 0u);
}

TEST(IntentIndexTest, OverlappingWindowsExtendThePin) {
  IntentIndex index(2);
  std::vector<Key> a = {1, 2};
  std::vector<Key> b = {2, 3};
  index.Add(0, 1, a, 0, 2);
  index.Add(0, 1, b, 1, 5);
  EXPECT_EQ(index.NextUse(1, 2), 0);
  for (IntentWindow* w : index.Due(0, 10)) index.MarkActed(w);
  EXPECT_EQ(index.ActedCount(1, 2), 2u);
  Recorder rec;
  rec.Expire(index, 0, 2);
  // Key 1 lost its only window; key 2 is still held by [1,5).
  EXPECT_EQ(rec.unpinned, (Unpinned{{1, 1}}));
  EXPECT_EQ(rec.next[std::make_pair(TableId{1}, Key{2})], 1);
  EXPECT_EQ(rec.next[std::make_pair(TableId{1}, Key{1})], kClockNever);
  rec.Expire(index, 0, 5);
  EXPECT_EQ(rec.unpinned, (Unpinned{{1, 1}, {1, 2}, {1, 3}}));
}

TEST(IntentIndexTest, UnactedWindowsExpireWithoutUnpin) {
  IntentIndex index(1);
  std::vector<Key> keys = {7};
  index.Add(0, 0, keys, 10, 11);
  Recorder rec;
  rec.Expire(index, 0, 11);
  EXPECT_TRUE(rec.unpinned.empty());
  EXPECT_EQ(rec.next[std::make_pair(TableId{0}, Key{7})], kClockNever);
  EXPECT_TRUE(index.Due(0, 100).empty());
}

TEST(IntentIndexTest, WorkersAreIndependent) {
  IntentIndex index(1);
  std::vector<Key> keys = {9};
  index.Add(0, 0, keys, 0, 1);
  index.Add(1, 0, keys, 4, 8);
  EXPECT_EQ(index.Due(1, 4).size(), 0u);
  EXPECT_EQ(index.Due(1, 5).size(), 1u);
  Recorder rec;
  rec.Expire(index, 0, 1);
  EXPECT_EQ(index.NextUse(0, 9), 4);
  EXPECT_EQ(rec.next[std::make_pair(TableId{0}, Key{9})], 4);
}

// The index counts its pending (key, window) pairs and its bytes: both grow
// with windows and return to the empty index's when every window expired.
TEST(IntentIndexTest, CountsPendingPairsAndBytes) {
  IntentIndex index(2);
  const size_t empty = index.MemoryBytes();
  EXPECT_EQ(index.PendingPairs(), 0u);
  std::vector<Key> keys(1000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 7;
  for (Clock c = 0; c < 8; ++c) index.Add(0, c % 2, keys, c, c + 1);
  EXPECT_EQ(index.PendingPairs(), 8000u);
  const size_t full = index.MemoryBytes();
  // At least the keys of the windows and one start per pair.
  EXPECT_GE(full - empty, 8000u * (sizeof(Key) + sizeof(Clock)));
  auto due = index.Due(0, 4);
  ASSERT_EQ(due.size(), 4u);
  for (IntentWindow* w : due) index.MarkActed(w);
  EXPECT_LT(index.MemoryBytes(), full);  // acted windows leave the pending order
  Recorder r;
  r.Expire(index, 0, 4);
  EXPECT_EQ(index.PendingPairs(), 4000u);
  r.Expire(index, 0, 100);
  EXPECT_EQ(index.PendingPairs(), 0u);
  EXPECT_EQ(index.TrackedKeys(), 0u);
  // Only the hash tables' bucket arrays stay grown (a pointer per bucket).
  EXPECT_LT(index.MemoryBytes(), empty + (full - empty) / 4);
}

}  // namespace
}  // namespace strata::engine
