// strata-test-labels: unit
#include "io/fault_env.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/io/io_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::io {
namespace {

using strata::testing::ScratchDir;

std::string ReadAll(Env* env, const std::string& path) {
  auto file = env->OpenFile(path, {.read_only = true});
  if (!file.ok()) return "<" + file.status().ToString() + ">";
  std::string out(*(*file)->Size(), '\0');
  size_t n = 0;
  EXPECT_TRUE((*file)->Read(0, out.size(), out.data(), &n).ok());
  out.resize(n);
  return out;
}

void WriteStr(File* file, uint64_t offset, const std::string& s) {
  ASSERT_TRUE(file->Write(offset, s.data(), s.size()).ok());
}

// A scratch directory and a FaultEnv over the real file system; tests that
// need the env made at another point (or several) make their own.
class FaultEnvTest : public ::testing::Test {
 protected:
  ScratchDir dir_;
  FaultEnv env_{Env::Default()};
};

TEST_F(FaultEnvTest, PassesThroughWithoutRules) {
  auto file = env_.OpenFile(dir_.File("a"), {.create = true});
  ASSERT_TRUE(file.ok());
  WriteStr(file->get(), 0, "hello");
  EXPECT_EQ(ReadAll(&env_, dir_.File("a")), "hello");
  EXPECT_EQ(env_.faults_injected(), 0u);
  EXPECT_EQ(env_.AsFaultEnv(), &env_);
  EXPECT_EQ(Env::Default()->AsFaultEnv(), nullptr);
}

TEST_F(FaultEnvTest, InjectedEioNamesFileAndOffset) {
  auto file = env_.OpenFile(dir_.File("data.sst"), {.create = true});
  ASSERT_TRUE(file.ok());
  WriteStr(file->get(), 0, std::string(100, 'x'));
  ASSERT_TRUE(env_.AddRule({.op = FaultOp::kRead, .path_substring = "data"}).ok());
  char buf[10];
  size_t n = 0;
  Status s = (*file)->Read(42, 10, buf, &n);
  EXPECT_TRUE(s.IsIOError());
  EXPECT_NE(s.message().find(dir_.File("data.sst")), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset 42"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("Input/output error"), std::string::npos) << s.ToString();
  EXPECT_EQ(env_.faults_injected(), 1u);
  // Writes are not covered by a read rule.
  WriteStr(file->get(), 0, "y");
  env_.ClearRules();
  EXPECT_TRUE((*file)->Read(42, 10, buf, &n).ok());
}

TEST_F(FaultEnvTest, NthCallAndTimesMaxAndPathFilter) {
  auto a = env_.OpenFile(dir_.File("a"), {.create = true});
  auto b = env_.OpenFile(dir_.File("b"), {.create = true});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(env_.AddRule({.op = FaultOp::kWrite,
                            .path_substring = "/a",
                            .nth_call = 3,
                            .times_max = 1,
                            .error_number = ENOSPC})
                  .ok());
  std::vector<bool> failed;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*b)->Write(i, "z", 1).ok());  // other path: never fails
    Status s = (*a)->Write(i, "z", 1);
    failed.push_back(!s.ok());
    if (!s.ok()) {
      EXPECT_TRUE(s.IsIOError());
      EXPECT_NE(s.message().find("No space left on device"), std::string::npos) << s.ToString();
    }
  }
  EXPECT_EQ(failed, (std::vector<bool>{false, false, true, false, false}));
}

TEST_F(FaultEnvTest, ShortReadAndLatency) {
  auto file = env_.OpenFile(dir_.File("a"), {.create = true});
  ASSERT_TRUE(file.ok());
  WriteStr(file->get(), 0, std::string(100, 'x'));
  ASSERT_TRUE(
      env_.AddRule({.op = FaultOp::kRead, .kind = FaultKind::kShortRead, .short_read_bytes = 7})
          .ok());
  ASSERT_TRUE(
      env_.AddRule({.op = FaultOp::kRead, .kind = FaultKind::kLatency, .latency_us = 2000}).ok());
  char buf[100];
  size_t n = 0;
  uint64_t t0 = env_.NowMicros();
  ASSERT_TRUE((*file)->Read(0, 100, buf, &n).ok());
  EXPECT_GE(env_.NowMicros() - t0, 2000u);
  EXPECT_EQ(n, 7u);
}

TEST_F(FaultEnvTest, ErrorsOnDirectoryOperations) {
  ASSERT_TRUE(env_.AddRule({.op = FaultOp::kSyncDir}).ok());
  ASSERT_TRUE(env_.AddRule({.op = FaultOp::kOpen, .path_substring = "bad"}).ok());
  EXPECT_TRUE(env_.SyncDir(dir_.path()).IsIOError());
  EXPECT_TRUE(env_.OpenFile(dir_.File("bad"), {.create = true}).status().IsIOError());
  EXPECT_FALSE(env_.FileExists(dir_.File("bad")));  // a failed call changes nothing
  EXPECT_TRUE(env_.OpenFile(dir_.File("good"), {.create = true}).ok());
}

TEST_F(FaultEnvTest, CrashRevertsToLastSync) {
  {
    auto file = env_.OpenFile(dir_.File("a"), {.create = true});
    ASSERT_TRUE(file.ok());
    WriteStr(file->get(), 0, "synced");
    ASSERT_TRUE((*file)->Sync().ok());
    ASSERT_TRUE(env_.SyncDir(dir_.path()).ok());
    WriteStr(file->get(), 0, "UNSYNCED-and-longer");
  }
  EXPECT_EQ(ReadAll(&env_, dir_.File("a")), "UNSYNCED-and-longer");
  ASSERT_TRUE(env_.DropUnsyncedWrites().ok());
  EXPECT_EQ(ReadAll(&env_, dir_.File("a")), "synced");
}

TEST_F(FaultEnvTest, CrashDropsFilesNeverDirSynced) {
  auto file = env_.OpenFile(dir_.File("new"), {.create = true});
  ASSERT_TRUE(file.ok());
  WriteStr(file->get(), 0, "data");
  ASSERT_TRUE((*file)->Sync().ok());  // content durable, directory entry not
  file->reset();
  ASSERT_TRUE(env_.DropUnsyncedWrites().ok());
  EXPECT_FALSE(env_.FileExists(dir_.File("new")));
}

TEST_F(FaultEnvTest, CrashUndoesRenameNotDirSynced) {
  for (const char* name : {"MANIFEST-1", "MANIFEST-2.tmp"}) {
    auto file = env_.OpenFile(dir_.File(name), {.create = true});
    ASSERT_TRUE(file.ok());
    WriteStr(file->get(), 0, name);
    ASSERT_TRUE((*file)->Sync().ok());
  }
  ASSERT_TRUE(env_.SyncDir(dir_.path()).ok());
  ASSERT_TRUE(env_.RenameFile(dir_.File("MANIFEST-2.tmp"), dir_.File("MANIFEST-1")).ok());
  EXPECT_EQ(ReadAll(&env_, dir_.File("MANIFEST-1")), "MANIFEST-2.tmp");
  ASSERT_TRUE(env_.DropUnsyncedWrites().ok());
  EXPECT_EQ(ReadAll(&env_, dir_.File("MANIFEST-1")), "MANIFEST-1");
  EXPECT_EQ(ReadAll(&env_, dir_.File("MANIFEST-2.tmp")), "MANIFEST-2.tmp");

  // Once the directory is synced the rename survives a crash.
  ASSERT_TRUE(env_.RenameFile(dir_.File("MANIFEST-2.tmp"), dir_.File("MANIFEST-1")).ok());
  ASSERT_TRUE(env_.SyncDir(dir_.path()).ok());
  ASSERT_TRUE(env_.DropUnsyncedWrites().ok());
  EXPECT_EQ(ReadAll(&env_, dir_.File("MANIFEST-1")), "MANIFEST-2.tmp");
  EXPECT_FALSE(env_.FileExists(dir_.File("MANIFEST-2.tmp")));
}

TEST_F(FaultEnvTest, CrashKeepsPreexistingFilesAndTruncatedOpenReverts) {
  {
    auto file = Env::Default()->OpenFile(dir_.File("old"), {.create = true});
    ASSERT_TRUE(file.ok());
    WriteStr(file->get(), 0, "before");
  }
  FaultEnv env(Env::Default());
  auto file = env.OpenFile(dir_.File("old"), {.truncate = true});
  ASSERT_TRUE(file.ok());
  WriteStr(file->get(), 0, "x");
  ASSERT_TRUE(env.DropUnsyncedWrites().ok());
  EXPECT_EQ(ReadAll(&env, dir_.File("old")), "before");
}

TEST_F(FaultEnvTest, RuleLimit) {
  for (size_t i = 0; i < kFaultRulesMax; ++i) ASSERT_TRUE(env_.AddRule({}).ok());
  EXPECT_TRUE(env_.AddRule({}).IsResourceExhausted());
}

// A rule with probability p fires on about p of the calls, the same calls
// for the same seed.
TEST_F(FaultEnvTest, ProbabilityIsSeededAndProportional) {
  auto fired = [&](uint64_t seed) {
    FaultEnv env(Env::Default());
    env.SetSeed(seed);
    auto file = env.OpenFile(dir_.File("p"), {.create = true});
    EXPECT_TRUE(file.ok());
    EXPECT_TRUE(env.AddRule({.op = FaultOp::kWrite, .probability = 0.25}).ok());
    std::vector<bool> out;
    for (int i = 0; i < 2000; ++i) out.push_back(!(*file)->Write(0, "x", 1).ok());
    return out;
  };
  auto a = fired(5), b = fired(5), c = fired(6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  size_t n = std::count(a.begin(), a.end(), true);
  EXPECT_GT(n, 400u);
  EXPECT_LT(n, 600u);
}

TEST_F(FaultEnvTest, AnyOpRuleCountsEveryKindOfCall) {
  ASSERT_TRUE(env_.AddRule({.op = FaultOp::kAny, .nth_call = 3}).ok());
  auto file = env_.OpenFile(dir_.File("a"), {.create = true});  // call 1
  ASSERT_TRUE(file.ok());
  WriteStr(file->get(), 0, "x");             // call 2
  EXPECT_TRUE((*file)->Sync().IsIOError());  // call 3: the cut
  EXPECT_TRUE(env_.SyncDir(dir_.path()).IsIOError());
  EXPECT_EQ(env_.calls_seen(), 4u);
  EXPECT_EQ(env_.calls_seen(FaultOp::kSync), 1u);
  EXPECT_EQ(env_.calls_seen(FaultOp::kSyncDir), 1u);
}

TEST_F(FaultEnvTest, ShortWriteStoresAPrefixThenFails) {
  auto file = env_.OpenFile(dir_.File("a"), {.create = true});
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(env_.AddRule({.op = FaultOp::kWrite,
                            .times_max = 1,
                            .kind = FaultKind::kShortWrite,
                            .short_read_bytes = 3})
                  .ok());
  Status s = (*file)->Write(0, "abcdef", 6);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find("short write"), std::string::npos) << s.ToString();
  EXPECT_EQ(ReadAll(&env_, dir_.File("a")), "abc");
}

TEST_F(FaultEnvTest, FailedSyncCanDropTheUnsyncedWrites) {
  auto file = env_.OpenFile(dir_.File("a"), {.create = true});
  ASSERT_TRUE(file.ok());
  WriteStr(file->get(), 0, "synced");
  ASSERT_TRUE((*file)->Sync().ok());
  WriteStr(file->get(), 0, "LOST-WRITE");
  ASSERT_TRUE(
      env_.AddRule({.op = FaultOp::kSync, .times_max = 1, .sync_error_drops_writes = true}).ok());
  EXPECT_TRUE((*file)->Sync().IsIOError());
  EXPECT_EQ(ReadAll(&env_, dir_.File("a")), "synced");  // at once, not only after a crash
  EXPECT_TRUE((*file)->Sync().ok());                    // the retry succeeds without the lost data
  EXPECT_EQ(ReadAll(&env_, dir_.File("a")), "synced");
}

TEST_F(FaultEnvTest, KillRuleKillsTheProcessAtThatCall) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FaultEnv env(Env::Default());
    if (!env.AddRule({.op = FaultOp::kSyncDir, .nth_call = 2, .kind = FaultKind::kKill}).ok()) {
      _exit(2);
    }
    if (!env.SyncDir(dir_.path()).ok()) _exit(3);
    (void)env.SyncDir(dir_.path());  // dies here
    _exit(4);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
}

// Every level CreateDirs makes or finds is fsynced into its parent, so a power
// loss cannot take a new store directory (and every checkpoint in it) away,
// even when an earlier call created a level and died before its fsync.
TEST_F(FaultEnvTest, CreateDirsSyncsTheParentOfEveryLevel) {
  ASSERT_TRUE(env_.AddRule({.op = FaultOp::kSyncDir, .nth_call = 1000}).ok());  // counts only
  const std::string path = dir_.File("a/b/c");
  const uint64_t levels = std::count(path.begin(), path.end(), '/');
  ASSERT_TRUE(env_.CreateDirs(path).ok());
  EXPECT_EQ(env_.calls_seen(FaultOp::kSyncDir), levels);
  ASSERT_TRUE(env_.CreateDirs(path).ok());  // a retry syncs them again
  EXPECT_EQ(env_.calls_seen(FaultOp::kSyncDir), 2 * levels);
  env_.ClearRules();
  ASSERT_TRUE(env_.AddRule({.op = FaultOp::kSyncDir}).ok());
  EXPECT_TRUE(env_.CreateDirs(dir_.File("d/e")).IsIOError());
}

}  // namespace
}  // namespace strata::io
