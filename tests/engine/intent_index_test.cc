// strata-test-labels: unit
#include "engine/intent_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "strata/trace.h"
#include "tests/util/scratch_dir.h"
#include "trace/generator.h"

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
  // At least one entry per pair: its key's record number and a link.
  EXPECT_GE(full - empty, 8000u * 2 * sizeof(uint32_t));
  auto due = index.Due(0, 4);
  ASSERT_EQ(due.size(), 4u);
  for (IntentWindow* w : due) index.MarkActed(w);
  EXPECT_TRUE(index.Due(0, 4).empty());  // acted windows leave the pending order
  EXPECT_LE(index.MemoryBytes(), full);
  Recorder r;
  r.Expire(index, 0, 4);
  EXPECT_EQ(index.PendingPairs(), 4000u);
  r.Expire(index, 0, 100);
  EXPECT_EQ(index.PendingPairs(), 0u);
  EXPECT_EQ(index.TrackedKeys(), 0u);
  // Only the window id arrays and Add's scratch stay grown.
  EXPECT_LT(index.MemoryBytes(), empty + (full - empty) / 4);
}

// A plain model of the index: every window with its key set, scanned.
struct ModelWindow {
  IntentWindowId id;
  WorkerId worker;
  TableId table;
  Clock start, end;
  std::set<Key> keys;
  bool acted = false;
};

struct Model {
  std::vector<ModelWindow> windows;  // in the order added

  Clock NextUse(TableId t, Key k) const {
    Clock best = kClockNever;
    for (const ModelWindow& w : windows) {
      if (w.table == t && w.keys.contains(k)) best = std::min(best, w.start);
    }
    return best;
  }
  uint32_t Acted(TableId t, Key k) const {
    uint32_t n = 0;
    for (const ModelWindow& w : windows) n += w.table == t && w.acted && w.keys.contains(k);
    return n;
  }
  std::vector<IntentWindowId> Due(WorkerId worker, Clock before) const {
    std::vector<const ModelWindow*> due;
    for (const ModelWindow& w : windows) {
      if (w.worker == worker && !w.acted && w.start < before) due.push_back(&w);
    }
    std::stable_sort(due.begin(), due.end(), [](auto* a, auto* b) { return a->start < b->start; });
    std::vector<IntentWindowId> ids;
    for (auto* w : due) ids.push_back(w->id);
    return ids;
  }
  // Removes the worker's windows with end <= clock, in end order; returns
  // the keys unpinned (acted count down to zero) and the keys touched.
  void Expire(WorkerId worker, Clock clock, std::multiset<std::pair<TableId, Key>>* unpinned,
              std::set<std::pair<TableId, Key>>* touched) {
    while (true) {
      auto next = windows.end();
      for (auto it = windows.begin(); it != windows.end(); ++it) {
        if (it->worker == worker && it->end <= clock &&
            (next == windows.end() || it->end < next->end))
          next = it;
      }
      if (next == windows.end()) return;
      ModelWindow gone = *next;
      windows.erase(next);
      for (Key k : gone.keys) {
        touched->insert({gone.table, k});
        if (gone.acted && Acted(gone.table, k) == 0) unpinned->insert({gone.table, k});
      }
    }
  }
  size_t Pairs() const {
    size_t n = 0;
    for (const ModelWindow& w : windows) n += w.keys.size();
    return n;
  }
  size_t Keys() const {
    std::set<std::pair<TableId, Key>> keys;
    for (const ModelWindow& w : windows)
      for (Key k : w.keys) keys.insert({w.table, k});
    return keys.size();
  }
};

// Random adds (duplicate keys, windows out of start order, several workers
// and tables), acts and expiries, checked after every step against the model:
// next uses, acted counts, due order, the keys of a window, what an expiry
// unpins and reports, and the counts.
TEST(IntentIndexTest, MatchesAModelOverRandomSequences) {
  constexpr TableId kTables = 2;
  constexpr WorkerId kWorkers = 3;
  constexpr size_t kUniverse = 40;
  std::vector<Key> universe = {0, ~Key{0}};
  for (size_t i = universe.size(); i < kUniverse; ++i)
    universe.push_back(i * 0x9e3779b97f4a7c15ull);
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    auto pick = [&](uint64_t n) { return static_cast<uint64_t>(rng() % n); };
    IntentIndex index(kTables);
    Model model;
    std::vector<Clock> clock(kWorkers, 0);
    for (int step = 0; step < 3000; ++step) {
      const auto w = static_cast<WorkerId>(pick(kWorkers));
      const uint64_t op = pick(10);
      if (op < 5) {
        const auto t = static_cast<TableId>(pick(kTables));
        const Clock start = clock[w] + static_cast<Clock>(pick(10));
        const Clock end = start + 1 + static_cast<Clock>(pick(6));
        std::vector<Key> keys(pick(14));
        for (Key& k : keys) k = universe[pick(kUniverse / (1 + pick(4)))];  // skewed, duplicates
        const IntentWindowId id = index.Add(w, t, keys, start, end);
        model.windows.push_back({id, w, t, start, end, std::set<Key>(keys.begin(), keys.end())});
      } else if (op < 7) {
        const Clock before = clock[w] + static_cast<Clock>(pick(12));
        std::vector<IntentWindow*> due = index.Due(w, before);
        std::vector<IntentWindowId> ids;
        for (IntentWindow* window : due) ids.push_back(window->id);
        ASSERT_EQ(ids, model.Due(w, before));
        const size_t act = due.empty() ? 0 : pick(due.size() + 1);
        for (size_t i = 0; i < act; ++i) {
          std::vector<Key> keys;
          index.AppendKeys(*due[i], &keys);
          std::sort(keys.begin(), keys.end());
          auto it = std::find_if(model.windows.begin(), model.windows.end(),
                                 [&](const ModelWindow& m) { return m.id == due[i]->id; });
          ASSERT_NE(it, model.windows.end());
          ASSERT_EQ(keys, std::vector<Key>(it->keys.begin(), it->keys.end()));
          ASSERT_EQ(due[i]->size(), it->keys.size());
          index.MarkActed(due[i]);
          it->acted = true;
        }
      } else {
        // Advance the clock; now and then past everything (a drain).
        clock[w] += pick(10) == 0 ? 100 : static_cast<Clock>(pick(4));
        std::multiset<std::pair<TableId, Key>> unpinned, want_unpinned;
        std::map<std::pair<TableId, Key>, Clock> next;
        index.Expire(
            w, clock[w],
            [&](TableId t, Key k) {
              unpinned.insert({t, k});
            },
            [&](TableId t, Key k, Clock c) {
              next[{t, k}] = c;
            });
        std::set<std::pair<TableId, Key>> touched;
        model.Expire(w, clock[w], &want_unpinned, &touched);
        ASSERT_EQ(unpinned, want_unpinned);
        ASSERT_EQ(next.size(), touched.size());
        for (const auto& [tk, c] : next) {
          ASSERT_TRUE(touched.contains(tk));
          ASSERT_EQ(c, model.NextUse(tk.first, tk.second)) << "key " << tk.second;
        }
      }
      for (TableId t = 0; t < kTables; ++t) {
        for (Key k : universe) {
          ASSERT_EQ(index.NextUse(t, k), model.NextUse(t, k)) << "step " << step << " key " << k;
          ASSERT_EQ(index.ActedCount(t, k), model.Acted(t, k)) << "step " << step << " key " << k;
        }
      }
      ASSERT_EQ(index.PendingPairs(), model.Pairs());
      ASSERT_EQ(index.PendingWindows(), model.windows.size());
      ASSERT_EQ(index.TrackedKeys(), model.Keys());
    }
  }
}

// The bound: at most 16 bytes per pending (key, window) at lookahead
// 256 on a criteo-1tb-preset trace (scale 0.002, 512 samples a batch, as in
// docs/benchmarks.md): every batch's keys become one window per table, 256
// batches stay pending, the planner acts on the nearest and the oldest
// expire. Checked at every batch once 256 are pending.
TEST(IntentIndexTest, AtMostSixteenBytesPerPendingPairAtLookahead256) {
  constexpr Clock kLookahead = 256;
  strata::testing::ScratchDir dir;
  auto options = trace::PresetOptions("criteo-1tb");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  options->scale = 0.002;
  options->batch_size = 512;
  options->batches = kLookahead + 64;
  options->seed = 1;
  ASSERT_TRUE(trace::Generate(*options, dir.File("tb.trace")).ok());
  auto reader = trace::TraceReader::Open(dir.File("tb.trace"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  IntentIndex index((*reader)->header().tables.size());
  trace::TraceBatch batch;
  double per_pair_max = 0;
  size_t checked = 0;
  for (Clock b = 0;; ++b) {
    auto more = (*reader)->Next(&batch);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    if (!*more) break;
    for (const trace::TraceBatchTable& t : batch.tables) index.Add(0, t.table, t.keys, b, b + 1);
    if (b + 1 < kLookahead) continue;
    const Clock clock = b + 1 - kLookahead;  // the trainer's clock: 256 batches pending
    for (IntentWindow* w : index.Due(0, clock + 2)) index.MarkActed(w);
    index.Expire(
        0, clock, [](TableId, Key) {}, [](TableId, Key, Clock) {});
    ASSERT_GE(index.PendingPairs(), 1u);
    per_pair_max =
        std::max(per_pair_max, double(index.MemoryBytes()) / double(index.PendingPairs()));
    ++checked;
  }
  EXPECT_EQ(checked, 65u);
  RecordProperty("bytes_per_pair_max", std::to_string(per_pair_max));
  EXPECT_LE(per_pair_max, 16.0) << index.PendingPairs() << " pairs, " << index.TrackedKeys()
                                << " keys, " << index.PendingWindows() << " windows";
}

}  // namespace
}  // namespace strata::engine
