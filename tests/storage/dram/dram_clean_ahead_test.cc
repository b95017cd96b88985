// strata-test-labels: unit
// DramCache::CleanAhead: the dirty rows nearest eviction are written early,
// without the mutation lock, so the Inserts that evict them do no I/O; a row
// changed or erased while its copy is written stays correct.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "base/mutex.h"
#include "storage/dram/dram_cache.h"
#include "storage/dram/limits.h"
#include "tests/storage/dram/dram_test_util.h"
#include "tests/storage/dram/gated_row_store.h"
#include "tests/storage/ssd/memory_row_store.h"

namespace strata::storage {
namespace {

using testing::GatedRowStore;
using testing::MakeRow;
using testing::MemoryRowStore;

class DramCleanAheadTest : public testing::DramCacheFixture {
 protected:
  // Fills a cache of `rows` dirty rows (row k's next use 100 + k: the larger
  // keys are evicted first) and cleans a window of `window` rows in calls of
  // `per_call` until one writes nothing. Each call must write the nearest
  // dirty rows, and all of them together exactly the window's.
  static void CleanWholeWindow(uint64_t rows, uint64_t window, uint64_t per_call, uint64_t plans) {
    MemoryRowStore store(OneTable());
    DramCacheOptions o;
    o.shards = 1;  // one eviction order, so "nearest" is exact
    auto c = MakeCache(rows, &store, OneTable(), o);
    std::vector<Key> keys(rows);
    std::vector<Clock> next(rows);
    for (uint64_t k = 0; k < rows; ++k) keys[k] = k, next[k] = static_cast<Clock>(100 + k);
    ASSERT_TRUE(Put(*c, keys, 1, next, std::vector<uint8_t>(rows, 1)).ok());
    uint64_t calls = 0, cleaned = 0;
    const uint64_t index_bytes = c->Stats().index_bytes;
    while (true) {
      auto r = c->CleanAhead(window, per_call);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ++calls;
      // The plan (12-byte entries, counted in index_bytes) never holds more
      // than twice its bound, whatever the window.
      const uint64_t bound = std::max(kDramCleanPlanRowsMin, rows / kDramCleanPlanDivisor);
      EXPECT_LE(c->Stats().index_bytes - index_bytes, 2 * bound * 12);
      if (r.value() == 0) break;
      EXPECT_EQ(r.value(), std::min(per_call, window - cleaned));
      cleaned += r.value();
      // Nearest first: after this call exactly the `cleaned` farthest rows.
      const auto flags = DirtyFlags(*c, {rows - cleaned - 1, rows - cleaned});
      ASSERT_EQ(flags, (std::vector<uint8_t>{1, 0})) << "after " << cleaned << " rows";
      ASSERT_LT(calls, 1000u);
    }
    EXPECT_EQ(cleaned, window);
    EXPECT_EQ(store.Rows(kTable).size(), window);
    EXPECT_EQ(store.Rows(kTable).count(rows - window), 1u);
    EXPECT_EQ(store.Rows(kTable).count(rows - window - 1), 0u);  // outside the window
    EXPECT_EQ(c->Stats().clean_plans, plans);
  }
  // A full cache of rows 1 to 16, all dirty, row k's next use 10 * k (16 is
  // evicted first).
  static std::unique_ptr<DramCache> SixteenDirtyRows(MemoryRowStore* store) {
    auto c = MakeCache(16, store);
    std::vector<Key> keys;
    std::vector<Clock> next;
    for (Key k = 1; k <= 16; ++k) keys.push_back(k), next.push_back(static_cast<Clock>(10 * k));
    EXPECT_TRUE(Put(*c, keys, 1, next, std::vector<uint8_t>(16, 1)).ok());
    return c;
  }
};

TEST_F(DramCleanAheadTest, WritesOnlyDirtyRowsNearestEvictionThenEvictionDoesNoIo) {
  MemoryRowStore store(OneTable());
  auto c = MakeCache(4, &store);
  // Farthest next use is evicted first: 4, 3, 2, 1. Row 3 is clean.
  ASSERT_TRUE(Put(*c, {1, 2, 3, 4}, 5, {10, 20, 30, 40}, {1, 1, 0, 1}).ok());
  auto cleaned = c->CleanAhead(/*window_rows=*/2, /*rows_max=*/10);
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_EQ(cleaned.value(), 1u);  // of the next two victims (4, 3) only 4 was dirty
  EXPECT_EQ(store.put_calls(), 1u);
  EXPECT_EQ(store.Rows(kTable).at(4), MakeRow(4, 5, kRowBytes));
  EXPECT_EQ(DirtyFlags(*c, {1, 2, 3, 4}), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(c->Stats().cleaned_ahead, 1u);
  // Evicting 4 and 3 now writes nothing.
  ASSERT_TRUE(Put(*c, {5, 6}, 6, {1, 2}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 2, 5, 6}));
  EXPECT_EQ(store.put_calls(), 1u);
  // rows_max bounds a pass; nothing dirty left in the window: 0.
  cleaned = c->CleanAhead(4, 1);
  ASSERT_TRUE(cleaned.ok());
  EXPECT_EQ(cleaned.value(), 1u);
  EXPECT_EQ(store.Rows(kTable).count(2), 1u);  // 2 (next use 20) before 1 (10)
  EXPECT_EQ(c->CleanAhead(1, 4).value(), 0u);  // the next victim (2) is clean now
}

TEST_F(DramCleanAheadTest, FailedWriteLeavesRowsDirtyForTheirEviction) {
  MemoryRowStore store(OneTable());
  auto c = MakeCache(2, &store);
  ASSERT_TRUE(Put(*c, {1, 2}, 5, {10, 20}, {1, 1}).ok());
  store.FailNextPuts(1);
  auto cleaned = c->CleanAhead(2, 2);
  ASSERT_FALSE(cleaned.ok());
  EXPECT_TRUE(cleaned.status().IsIOError()) << cleaned.status().ToString();
  EXPECT_NE(cleaned.status().message().find("'emb'"), std::string::npos);
  EXPECT_EQ(DirtyFlags(*c, {1, 2}), (std::vector<uint8_t>{1, 1}));
  EXPECT_EQ(c->Stats().writeback_errors, 1u);
  // Eviction still writes the victim (no row lost).
  ASSERT_TRUE(Put(*c, {3}, 6, {5}).ok());
  EXPECT_EQ(store.Rows(kTable).at(2), MakeRow(2, 5, kRowBytes));
}

TEST_F(DramCleanAheadTest, RowOverwrittenDuringItsWriteStaysDirtyAndIsNoVictim) {
  GatedRowStore store(OneTable());
  auto c = MakeCache(2, &store);
  ASSERT_TRUE(Put(*c, {1, 2}, 5, {90, 10}, {1, 0}).ok());  // 1 is the next victim
  store.Arm();
  Result<uint64_t> cleaned = uint64_t{0};
  std::thread cleaner([&] { cleaned = c->CleanAhead(1, 1); });
  store.WaitUntilPutStarted();
  // While row 1's copy is written: it is readable, no victim (2 goes
  // instead), and may be overwritten.
  ASSERT_TRUE(Put(*c, {3}, 6, {50}).ok());
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{1, 3}));
  ASSERT_TRUE(Put(*c, {1}, 7, {90}, {1}).ok());
  store.Release();
  cleaner.join();
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_EQ(cleaned.value(), 0u);  // written, but the row changed meanwhile
  EXPECT_EQ(DirtyFlags(*c, {1}), (std::vector<uint8_t>{1}));
  EXPECT_EQ(store.Rows(kTable).at(1), MakeRow(1, 5, kRowBytes));
  ASSERT_TRUE(c->FlushDirty().ok());
  EXPECT_EQ(store.Rows(kTable).at(1), MakeRow(1, 7, kRowBytes));
}

TEST_F(DramCleanAheadTest, EraseOfARowBeingWrittenWaitsForTheWrite) {
  GatedRowStore store(OneTable());
  auto c = MakeCache(2, &store);
  ASSERT_TRUE(Put(*c, {1, 2}, 5, {90, 10}, {1, 0}).ok());
  store.Arm();
  std::thread cleaner([&] { EXPECT_TRUE(c->CleanAhead(1, 1).ok()); });
  store.WaitUntilPutStarted();
  bool write_done_before_erase_returned = false;
  std::thread eraser([&] {
    EXPECT_TRUE(c->Erase(kTable, std::vector<Key>{1}).ok());
    write_done_before_erase_returned = store.put_finished();
  });
  store.Release();
  eraser.join();
  cleaner.join();
  EXPECT_TRUE(write_done_before_erase_returned);
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{2}));
  EXPECT_EQ(store.Rows(kTable).at(1), MakeRow(1, 5, kRowBytes));
}

// Regression: the cleaner takes the next victims out of the eviction order
// while it writes them; an Insert that needed them for room failed with
// ResourceExhausted ("every other resident row is pinned") instead of waiting.
TEST_F(DramCleanAheadTest, InsertNeedingRowsBeingWrittenWaitsForTheWrite) {
  GatedRowStore store(OneTable());
  auto c = MakeCache(2, &store);
  ASSERT_TRUE(Put(*c, {1, 2}, 5, {90, 10}, {1, 1}).ok());
  store.Arm();
  Result<uint64_t> cleaned = uint64_t{0};
  std::thread cleaner([&] { cleaned = c->CleanAhead(2, 2); });
  store.WaitUntilPutStarted();  // rows 1 and 2, all of the cache, are being written
  Status inserted;
  bool write_done_before_insert_returned = false;
  std::atomic<bool> insert_returned{false};
  std::thread inserter([&] {
    inserted = Put(*c, {3, 4}, 6, {50, 60});
    write_done_before_insert_returned = store.put_finished();
    insert_returned = true;
  });
  // The write is let go once the Insert waits for it (or has given up).
  while (c->Stats().room_waits == 0 && !insert_returned) std::this_thread::yield();
  store.Release();
  inserter.join();
  cleaner.join();
  ASSERT_TRUE(inserted.ok()) << inserted.ToString();
  EXPECT_TRUE(write_done_before_insert_returned);
  ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
  EXPECT_EQ(cleaned.value(), 2u);
  EXPECT_EQ(c->Stats().room_waits, 1u);
  EXPECT_EQ(ResidentKeys(*c, kTable), (std::vector<Key>{3, 4}));
  // The victims were clean by then: the clean's one MultiPut wrote them.
  EXPECT_EQ(store.put_calls(), 1u);
  EXPECT_EQ(store.Rows(kTable).at(1), MakeRow(1, 5, kRowBytes));
  EXPECT_EQ(store.Rows(kTable).at(2), MakeRow(2, 5, kRowBytes));
}

TEST_F(DramCleanAheadTest, FlushDirtyDuringACleanWritesTheNewestCopyLast) {
  GatedRowStore store(OneTable());
  auto c = MakeCache(2, &store);
  ASSERT_TRUE(Put(*c, {1, 2}, 5, {90, 10}, {1, 0}).ok());
  store.Arm();
  std::thread cleaner([&] { EXPECT_TRUE(c->CleanAhead(1, 1).ok()); });
  store.WaitUntilPutStarted();  // version 5 of row 1 is being written
  ASSERT_TRUE(Put(*c, {1}, 7, {90}, {1}).ok());
  std::thread flusher([&] { EXPECT_TRUE(c->FlushDirty().ok()); });
  store.Release();
  flusher.join();
  cleaner.join();
  EXPECT_EQ(store.Rows(kTable).at(1), MakeRow(1, 7, kRowBytes));
  EXPECT_EQ(DirtyFlags(*c, {1}), (std::vector<uint8_t>{0}));
}

// Calls after the first write from the plan its pass over the metadata
// made (the dirty rows of the window, nearest eviction first) instead of
// passing over the metadata again, and still write the window's rows
// exactly, nearest first, and nothing outside it.
TEST_F(DramCleanAheadTest, ConsecutiveCallsWriteFromOnePassOverTheMetadata) {
  // A plan holds 4,096 rows here (kDramCleanPlanRowsMin): the whole window.
  // 2048 is no multiple of 100: the 21st call spends the plan (48 rows) and
  // passes again for the rest of its 100 while its 48 are flagged, finding
  // none; the last call passes once more, finding none.
  CleanWholeWindow(8192, 2048, 100, 3);
}

// A window with more dirty rows than a plan holds: the plan keeps the
// nearest (cut back during its pass once it reaches twice its bound), and
// a call that spends it passes again for the rest.
TEST_F(DramCleanAheadTest, APlanKeepsTheNearestRowsOfALargerWindow) {
  // Plans of 4,096 rows: calls 1 to 4 and 96 rows of the 5th from the
  // first, the 5th's other 904 and calls 6 to 8 and 192 rows of the 9th
  // from the second, the rest from the third; the 11th finds nothing.
  CleanWholeWindow(16384, 10000, 1000, 4);
}

// A bound that is no power of two (600,000 / 128 = 4,687 rows): the plan
// grows to twice it, not to the next power of two (fails when it grows by
// doubling: 16,384 entries).
TEST_F(DramCleanAheadTest, APlanStaysWithinItsBoundOfALargeCache) {
  // Calls 1 to 5 spend a plan each and pass again within the call; the
  // 6th finds nothing.
  CleanWholeWindow(600000, 20000, 4096, 6);
}

// A failed write leaves its rows dirty and the plan past them: the next
// call passes again and writes them first, the nearest, before the rest of
// the old plan.
TEST_F(DramCleanAheadTest, RowsOfAFailedWriteAreTheNextCallsFirst) {
  MemoryRowStore store(OneTable());
  auto c = SixteenDirtyRows(&store);
  store.FailNextPuts(1);
  EXPECT_FALSE(c->CleanAhead(8, 2).ok());  // 16 and 15
  ASSERT_EQ(c->CleanAhead(8, 2).value(), 2u);
  EXPECT_EQ(DirtyFlags(*c, {16, 15, 14}), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(c->Stats().clean_plans, 2u);
}

// Rows that changed after the plan was made are checked again before they
// are written: an erased row, a row overwritten clean and a row whose next
// use came near are skipped; once the plan is spent, a new pass finds the
// dirty rows that came into the window since.
TEST_F(DramCleanAheadTest, APlanSkipsRowsThatChangedAndANewPassFindsNewOnes) {
  MemoryRowStore store(OneTable());
  auto c = SixteenDirtyRows(&store);
  // The window: the 8 farthest, 16 down to 9, all dirty.
  ASSERT_EQ(c->CleanAhead(8, 2).value(), 2u);
  EXPECT_EQ(DirtyFlags(*c, {16, 15, 14}), (std::vector<uint8_t>{0, 0, 1}));
  ASSERT_TRUE(c->Erase(kTable, std::vector<Key>{14}).ok());
  ASSERT_TRUE(Put(*c, {13}, 2, {130}, {0}).ok());  // overwritten clean
  ASSERT_TRUE(c->SetNextUse(kTable, std::vector<Key>{12}, std::vector<Clock>{5}).ok());
  ASSERT_EQ(c->CleanAhead(8, 2).value(), 2u);
  EXPECT_EQ(DirtyFlags(*c, {12, 11, 10, 9}), (std::vector<uint8_t>{1, 0, 0, 1}));
  EXPECT_EQ(store.Rows(kTable).count(13), 0u);
  EXPECT_EQ(store.Rows(kTable).count(14), 0u);
  EXPECT_EQ(c->Stats().clean_plans, 1u);
  // A new dirty row farther than all (room: 14 was erased). The plan has 9
  // left; then a new pass finds 20.
  ASSERT_TRUE(Put(*c, {20}, 1, {1000}, {1}).ok());
  ASSERT_EQ(c->CleanAhead(8, 2).value(), 2u);
  EXPECT_EQ(DirtyFlags(*c, {20, 9, 8}), (std::vector<uint8_t>{0, 0, 1}));
  EXPECT_EQ(c->Stats().clean_plans, 2u);
  EXPECT_EQ(store.Rows(kTable).at(20), MakeRow(20, 1, kRowBytes));
}

// A planned row that a move up pinned after the pass is no victim: it is
// not written while pinned, and is once the move up is undone.
TEST_F(DramCleanAheadTest, APlannedRowMovingUpIsNotWritten) {
  MemoryRowStore store(OneTable());
  auto c = SixteenDirtyRows(&store);
  ASSERT_EQ(c->CleanAhead(8, 1).value(), 1u);  // 16; the plan has 15 to 9
  DramCache::MoveUp move;
  ASSERT_TRUE(c->BeginMoveUp(kTable, std::vector<Key>{15}, &move).ok());
  ASSERT_EQ(c->CleanAhead(8, 1).value(), 1u);
  EXPECT_EQ(DirtyFlags(*c, {15, 14}), (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(store.Rows(kTable).count(15), 0u);
  ASSERT_TRUE(c->EndMoveUp(kTable, std::vector<Key>{15}, &move, /*moved=*/false).ok());
  // The plan is past 15 now; once spent, a pass finds it again (a window
  // of 8 from 16 down to 9, 16 and 14 clean).
  uint64_t calls = 0;
  while (DirtyFlags(*c, {15})[0] != 0 && calls++ < 16) ASSERT_TRUE(c->CleanAhead(8, 1).ok());
  EXPECT_EQ(store.Rows(kTable).count(15), 1u);
  EXPECT_EQ(store.Rows(kTable).count(8), 0u);  // outside the window
}

// Evictions past half the window since the plan move the window on: the
// next call passes over the metadata again.
TEST_F(DramCleanAheadTest, AWindowTheEvictionsMovedOnIsPlannedAgain) {
  MemoryRowStore store(OneTable());
  auto c = SixteenDirtyRows(&store);
  ASSERT_EQ(c->CleanAhead(4, 1).value(), 1u);  // 16
  ASSERT_EQ(c->CleanAhead(4, 1).value(), 1u);  // 15, from the same plan
  EXPECT_EQ(c->Stats().clean_plans, 1u);
  ASSERT_TRUE(Put(*c, {30}, 1, {1}).ok());     // evicts 16: one, not past half of 4
  ASSERT_EQ(c->CleanAhead(4, 1).value(), 1u);  // 14
  EXPECT_EQ(c->Stats().clean_plans, 1u);
  ASSERT_TRUE(Put(*c, {31, 32}, 1, {1, 1}).ok());  // evicts 15 and 14: three since
  ASSERT_EQ(c->CleanAhead(4, 1).value(), 1u);      // 13
  EXPECT_EQ(c->Stats().clean_plans, 2u);
  EXPECT_EQ(DirtyFlags(*c, {13, 12}), (std::vector<uint8_t>{0, 1}));
}

TEST_F(DramCleanAheadTest, WithoutBackingStoreDoesNothing) {
  auto c = MakeCache(2);
  ASSERT_TRUE(Put(*c, {1, 2}, 5, {10, 20}, {1, 1}).ok());
  auto cleaned = c->CleanAhead(2, 2);
  ASSERT_TRUE(cleaned.ok());
  EXPECT_EQ(cleaned.value(), 0u);
  EXPECT_EQ(DirtyFlags(*c, {1, 2}), (std::vector<uint8_t>{1, 1}));
}

}  // namespace
}  // namespace strata::storage
