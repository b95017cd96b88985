#include "base/thread_name.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "tests/util/thread_names.h"

namespace strata {
namespace {

int MyTid() { return static_cast<int>(::syscall(SYS_gettid)); }

// Names a new thread from this one, then reads the name the kernel keeps.
std::string NameSeenBy(const std::string& name) {
  std::atomic<int> tid{0};
  std::atomic<bool> go{false};
  std::thread t([&] {
    tid.store(MyTid());
    while (!go.load()) std::this_thread::yield();
  });
  base::NameThread(t.native_handle(), name);
  while (tid.load() == 0) std::this_thread::yield();
  const std::string seen = testing::ThreadName(tid.load());
  go.store(true);
  t.join();
  return seen;
}

TEST(ThreadNameTest, NamesTheGivenThreadOnly) {
  const std::string before = testing::ThreadName(MyTid());
  EXPECT_EQ(NameSeenBy("strata-test"), "strata-test");
  EXPECT_EQ(testing::ThreadName(MyTid()), before);
  base::NameThread(pthread_self(), "strata-self");
  EXPECT_EQ(testing::ThreadName(MyTid()), "strata-self");
  base::NameThread(pthread_self(), before);
}

TEST(ThreadNameTest, LongNamesAreCutToWhatLinuxKeeps) {
  const std::string seen = NameSeenBy("strata-0123456789abcdef");
  EXPECT_EQ(seen, "strata-01234567");
  EXPECT_EQ(seen.size(), base::kThreadNameBytesMax);
}

}  // namespace
}  // namespace strata
