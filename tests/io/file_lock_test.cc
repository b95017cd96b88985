// strata-test-labels: unit
// strata-test-timeout: 60
// Env::LockFile (io/file_lock.h): one holder at a time, in this process as in
// another; the holder's pid in the refusal; a dead holder blocks nothing.
#include "io/file_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "io/env.h"
#include "tests/util/scratch_dir.h"

namespace strata::io {
namespace {

TEST(FileLockTest, SecondLockInThisProcessIsRefusedWithThePid) {
  strata::testing::ScratchDir dir;
  const std::string path = dir.File("LOCK");
  auto first = Env::Default()->LockFile(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::unique_ptr<FileLock> held = std::move(first).value();
  auto second = Env::Default()->LockFile(path);
  ASSERT_TRUE(second.status().IsUnavailable()) << second.status().ToString();
  EXPECT_NE(second.status().message().find(path), std::string::npos);
  EXPECT_NE(
      second.status().message().find("process " + std::to_string(::getpid()) + " (this process)"),
      std::string::npos)
      << second.status().message();
  held.reset();
  auto third = Env::Default()->LockFile(path);
  EXPECT_TRUE(third.ok()) << third.status().ToString();
}

TEST(FileLockTest, LockOfAnotherProcessIsRefusedUntilItDies) {
  strata::testing::ScratchDir dir;
  const std::string path = dir.File("LOCK");
  int locked[2], release[2];
  ASSERT_EQ(::pipe(locked), 0);
  ASSERT_EQ(::pipe(release), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(locked[0]);
    ::close(release[1]);
    auto lock = LockFilePosix(path);
    const char ok = lock.ok() ? 'y' : 'n';
    if (::write(locked[1], &ok, 1) != 1) ::_exit(2);
    char c;
    (void)::read(release[0], &c, 1);  // returns when the parent closes its end
    ::_exit(0);                       // dies holding the lock: the kernel drops it
  }
  ::close(locked[1]);
  ::close(release[0]);
  char ok = 0;
  ASSERT_EQ(::read(locked[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');
  auto refused = Env::Default()->LockFile(path);
  EXPECT_TRUE(refused.status().IsUnavailable()) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("held by process " + std::to_string(child)),
            std::string::npos)
      << refused.status().message();
  ::close(release[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto after = Env::Default()->LockFile(path);
  EXPECT_TRUE(after.ok()) << after.status().ToString();
  ::close(locked[0]);
}

TEST(FileLockTest, MissingDirectoryIsAnError) {
  strata::testing::ScratchDir dir;
  auto lock = Env::Default()->LockFile(dir.File("missing/LOCK"));
  EXPECT_FALSE(lock.ok());
  EXPECT_FALSE(lock.status().IsUnavailable());
  EXPECT_NE(lock.status().message().find("missing/LOCK"), std::string::npos);
}

}  // namespace
}  // namespace strata::io
