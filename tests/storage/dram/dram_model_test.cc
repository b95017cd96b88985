// strata-test-labels: unit
// 100k random operations on a cache of tiny capacity over a store that fails
// and recovers: at every check, the newest copy of each row (the tier above,
// else the cache, else the store) equals a std::unordered_map model.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <unordered_map>

#include "storage/dram/dram_cache.h"
#include "tests/storage/dram/dram_test_util.h"
#include "tests/storage/ssd/memory_row_store.h"

namespace strata::storage {
namespace {

using testing::MakeRow;
using testing::MemoryRowStore;

constexpr uint64_t kOps = 100000;
constexpr Key kKeySpace = 48;
const std::vector<TableSpec> kTables = {{1, "a", 16}, {2, "b", 40}};

struct TableModel {
  std::unordered_map<Key, uint64_t> newest;    // key -> version: the model
  std::unordered_map<Key, uint64_t> above;     // rows moved up to the tier above (T0)
  std::multimap<Key, DramCache::MoveUp> pins;  // moves up begun and not ended
};

// Keys span both ends of the 64-bit range.
Key KeyOf(uint64_t i) { return i % 2 ? kKeyMax - i / 2 : i / 2; }

class DramModelTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    DramCacheOptions o;
    o.dram_bytes_max = 160;  // four rows of b, ten of a
    if (GetParam()) {        // a fallback range, as the engine sets one
      o.fallback_base = 1000;
      o.fallback_end = 2000;
    }
    o.lock_stripes = 2;
    auto made = DramCache::Create(o, kTables, &store_);
    ASSERT_TRUE(made.ok());
    cache_ = std::move(made).value();
  }

  // Every key: the newest copy across the tiers matches the model.
  void CheckAgainstModel() {
    for (const TableSpec& t : kTables) {
      TableModel& m = model_[t.id];
      std::unordered_map<Key, std::pair<uint64_t, bool>> cached;
      ASSERT_TRUE(cache_
                      ->ForEach(t.id,
                                [&](Key k, std::span<const std::byte> row, bool dirty) {
                                  int64_t v = testing::RowVersion(k, row);
                                  EXPECT_GE(v, 0) << "torn row of key " << k;
                                  cached[k] = {static_cast<uint64_t>(v), dirty};
                                  return Status::Ok();
                                })
                      .ok());
      auto stored = store_.Rows(t.id);
      for (auto& [k, move] : m.pins) EXPECT_TRUE(cached.count(k)) << "pinned key " << k << " lost";
      for (uint64_t i = 0; i < kKeySpace; ++i) {
        Key k = KeyOf(i);
        int64_t got = -1;
        if (m.above.count(k)) {
          got = static_cast<int64_t>(m.above[k]);
          EXPECT_FALSE(cached.count(k)) << "key " << k << " both above and in the cache";
        } else if (cached.count(k)) {
          got = static_cast<int64_t>(cached[k].first);
          if (!cached[k].second) {  // a clean row equals the store's copy
            ASSERT_TRUE(stored.count(k)) << "clean key " << k << " missing from the store";
            EXPECT_EQ(testing::RowVersion(k, stored[k]), got) << "clean key " << k;
          }
        } else if (stored.count(k)) {
          got = testing::RowVersion(k, stored[k]);
        }
        int64_t want = m.newest.count(k) ? static_cast<int64_t>(m.newest[k]) : -1;
        ASSERT_EQ(got, want) << "table " << t.id << " key " << k;
      }
    }
    ASSERT_LE(cache_->Stats().bytes_used, 160u);
  }

  MemoryRowStore store_{kTables};
  std::unique_ptr<DramCache> cache_;
  std::map<TableId, TableModel> model_;
};

TEST_P(DramModelTest, RandomOperationsMatchModel) {
  std::mt19937_64 rng(1234 + static_cast<int>(GetParam()));
  uint64_t version = 1, failed_inserts = 0, ok_inserts = 0;
  auto pick = [&] { return KeyOf(rng() % kKeySpace); };
  for (uint64_t op = 0; op < kOps; ++op) {
    const TableSpec& t = kTables[rng() % 2];
    TableModel& m = model_[t.id];
    const uint32_t rb = t.row_bytes;
    switch (rng() % 10) {
      case 0:
      case 1:
      case 2: {  // write new versions (dirty), or move rows down from above
        std::vector<Key> keys(1 + rng() % 3);
        std::vector<uint64_t> versions;
        std::vector<std::byte> rows;
        for (Key& k : keys) {
          k = rng() % 4 == 0 && !m.above.empty() ? m.above.begin()->first : pick();
          versions.push_back(m.above.count(k) ? m.above[k] : version++);
          auto row = MakeRow(k, versions.back(), rb);
          rows.insert(rows.end(), row.begin(), row.end());
        }
        std::vector<uint8_t> dirty(keys.size(), 1);
        std::vector<Clock> next(keys.size());
        for (Clock& c : next)
          c = rng() % 3 == 0 ? kClockNever
                             : static_cast<Clock>(rng() % 2 ? rng() % 50 : 1000 + rng() % 1000);
        Status s = cache_->Insert(t.id, keys, rows, dirty, next);
        if (s.ok()) {
          ++ok_inserts;
          for (size_t i = 0; i < keys.size(); ++i) {
            m.newest[keys[i]] = versions[i];
            m.above.erase(keys[i]);
          }
        } else {
          ++failed_inserts;
          ASSERT_TRUE(s.IsIOError() || s.IsResourceExhausted()) << s.ToString();
        }
        break;
      }
      case 3: {  // load a row from the store as a clean copy
        Key k = pick();
        if (m.above.count(k)) break;
        std::vector<std::byte> out(rb);
        std::vector<uint8_t> found(1);
        ASSERT_TRUE(cache_->Lookup(t.id, std::span<const Key>(&k, 1), out, found, {}).ok());
        if (found[0]) break;
        ASSERT_TRUE(store_.MultiGet(t.id, std::span<const Key>(&k, 1), out, found).ok());
        if (!found[0]) break;
        Status s = cache_->Insert(t.id, std::span<const Key>(&k, 1), out, {}, {});
        ASSERT_TRUE(s.ok() || s.IsIOError() || s.IsResourceExhausted()) << s.ToString();
        break;
      }
      case 4: {  // lookups return the newest version
        std::vector<Key> keys = {pick(), pick(), pick()};
        std::vector<std::byte> out(keys.size() * rb);
        std::vector<uint8_t> found(keys.size());
        ASSERT_TRUE(cache_->Lookup(t.id, keys, out, found, {}).ok());
        for (size_t i = 0; i < keys.size(); ++i) {
          if (!found[i]) continue;
          ASSERT_EQ(testing::RowVersion(keys[i], {out.data() + i * rb, rb}),
                    static_cast<int64_t>(m.newest.at(keys[i])));
        }
        break;
      }
      case 5: {  // move a row up: copy it out, then erase it
        Key k = pick();
        std::vector<std::byte> out(rb);
        std::vector<uint8_t> found(1);
        ASSERT_TRUE(cache_->Lookup(t.id, std::span<const Key>(&k, 1), out, found, {}).ok());
        if (!found[0] || m.pins.count(k)) break;
        m.above[k] = static_cast<uint64_t>(testing::RowVersion(k, out));
        ASSERT_TRUE(cache_->Erase(t.id, std::span<const Key>(&k, 1)).ok());
        break;
      }
      case 6: {  // begin a move up (at most two per table), or end one: moved or not
        if (m.pins.size() < 2 && rng() % 2) {
          Key k = pick();
          DramCache::MoveUp move;
          ASSERT_TRUE(cache_->BeginMoveUp(t.id, std::span<const Key>(&k, 1), &move).ok());
          if (move.pinned[0]) m.pins.emplace(k, std::move(move));
        } else if (!m.pins.empty()) {
          auto it = m.pins.begin();
          Key k = it->first;
          const bool moved = m.pins.count(k) == 1 && rng() % 2;
          if (moved) {  // the tier above holds it now: copy it there first
            std::vector<std::byte> out(rb);
            std::vector<uint8_t> found(1);
            ASSERT_TRUE(cache_->Lookup(t.id, std::span<const Key>(&k, 1), out, found, {}).ok());
            ASSERT_EQ(found[0], 1) << "key " << k << " left while moving up";
            m.above[k] = static_cast<uint64_t>(testing::RowVersion(k, out));
          }
          ASSERT_TRUE(
              cache_->EndMoveUp(t.id, std::span<const Key>(&k, 1), &it->second, moved).ok());
          m.pins.erase(it);
        }
        break;
      }
      case 7: {  // next uses
        std::vector<Key> keys = {pick(), pick()};
        std::vector<Clock> next = {static_cast<Clock>(rng() % 2 ? rng() % 50 : 1000 + rng() % 1000),
                                   kClockNever};
        ASSERT_TRUE(cache_->SetNextUse(t.id, keys, next).ok());
        break;
      }
      case 8: {  // checkpoint
        Status s = cache_->FlushDirty();
        ASSERT_TRUE(s.ok() || s.IsIOError()) << s.ToString();
        break;
      }
      case 9:  // the store fails for a while, sometimes after a prefix
        if (rng() % 4 == 0) store_.FailNextPuts(1 + rng() % 4, rng() % 2);
        break;
    }
    if (op % 4 == 0) {
      ASSERT_NO_FATAL_FAILURE(CheckAgainstModel()) << "after op " << op;
    }
  }
  store_.FailNextPuts(0);
  ASSERT_TRUE(cache_->FlushDirty().ok());
  ASSERT_NO_FATAL_FAILURE(CheckAgainstModel());
  DramCacheStats s = cache_->Stats();
  EXPECT_GT(s.evictions, 1000u);
  EXPECT_GT(s.writeback_errors, 10u);
  EXPECT_GT(failed_inserts, 10u);
  EXPECT_GT(ok_inserts, 10000u);
}

INSTANTIATE_TEST_SUITE_P(FallbackRange, DramModelTest, ::testing::Bool());

}  // namespace
}  // namespace strata::storage
