// strata-test-labels: unit
// DramCache::CleanAhead: the dirty rows nearest eviction are written early,
// without the mutation lock, so the Inserts that evict them do no I/O; a row
// changed or erased while its copy is written stays correct.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "base/mutex.h"
#include "storage/dram/dram_cache.h"
#include "tests/storage/dram/dram_test_util.h"
#include "tests/storage/dram/gated_row_store.h"
#include "tests/storage/ssd/memory_row_store.h"

namespace strata::storage {
namespace {

using testing::GatedRowStore;
using testing::MakeRow;
using testing::MemoryRowStore;
using DramCleanAheadTest = testing::DramCacheFixture;

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
