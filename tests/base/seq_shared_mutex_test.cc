// base::SeqSharedMutex: its count is odd exactly while a writer holds it,
// moves on with every exclusive hold, and stays put for readers and for a
// try_lock that fails.
#include <gtest/gtest.h>

#include <latch>
#include <thread>

#include "base/mutex.h"

namespace strata::base {
namespace {

TEST(SeqSharedMutexTest, TheCountIsOddWhileAWriterHoldsIt) {
  SeqSharedMutex mu;
  const uint32_t start = mu.Seq();
  EXPECT_EQ(start % 2, 0u);
  mu.lock();
  EXPECT_EQ(mu.SeqRelaxed(), start + 1);
  mu.unlock();
  EXPECT_EQ(mu.Seq(), start + 2);
  if (mu.try_lock()) {
    EXPECT_EQ(mu.SeqRelaxed(), start + 3);
    mu.unlock();
  } else {
    ADD_FAILURE() << "try_lock failed with no other holder";
  }
  EXPECT_EQ(mu.Seq(), start + 4);
}

TEST(SeqSharedMutexTest, ReadersAndAFailedTryLockLeaveTheCount) {
  SeqSharedMutex mu;
  const uint32_t start = mu.Seq();
  if (mu.try_lock_shared()) {
    mu.unlock_shared();
  } else {
    ADD_FAILURE() << "try_lock_shared failed with no other holder";
  }
  EXPECT_EQ(mu.Seq(), start);
  mu.lock_shared();
  // Another thread tries to write while this one reads.
  bool got = true;
  std::thread writer([&] {
    got = false;
    if (mu.try_lock()) {
      got = true;
      mu.unlock();
    }
  });
  writer.join();
  EXPECT_FALSE(got);
  EXPECT_EQ(mu.Seq(), start);
  mu.unlock_shared();
}

TEST(SeqSharedMutexTest, AReaderSeesEveryHoldBetweenItsTwoReads) {
  // A reader that read the count before a writer's hold and again after it
  // sees it moved; the writes made under the hold are visible after it.
  SeqSharedMutex mu;
  int value = 0;
  const uint32_t before = mu.Seq();
  std::latch held(1);
  std::thread writer([&] {
    WriterLock lock(&mu);
    value = 1;
    held.count_down();
  });
  held.wait();
  writer.join();
  EXPECT_NE(mu.Seq(), before);
  EXPECT_EQ(mu.Seq() % 2, 0u);
  ReaderLock lock(&mu);
  EXPECT_EQ(value, 1);
}

}  // namespace
}  // namespace strata::base
