// strata-test-labels: unit
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/aligned.h"
#include "io/env.h"
#include "tests/io/io_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::io {
namespace {

using strata::testing::ScratchDir;
using testing::FillPattern;
using testing::MatchesPattern;

// The opened file, or nullptr after recording the error (ASSERT_NE it).
std::unique_ptr<File> OpenFile(const std::string& path, FileOptions options) {
  auto file = Env::Default()->OpenFile(path, options);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(file).value() : nullptr;
}

TEST(PosixEnvTest, WriteReadRoundTripAndSize) {
  ScratchDir dir;
  auto file = OpenFile(dir.File("a"), {.create = true});
  ASSERT_NE(file, nullptr);
  std::vector<uint8_t> data(10000);
  FillPattern(data.data(), 100, data.size());
  ASSERT_TRUE(file->Write(100, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Sync().ok());
  EXPECT_EQ(*file->Size(), 10100u);
  std::vector<uint8_t> back(data.size());
  size_t n = 0;
  ASSERT_TRUE(file->Read(100, back.size(), back.data(), &n).ok());
  EXPECT_EQ(n, back.size());
  EXPECT_TRUE(MatchesPattern(back.data(), 100, n));
  EXPECT_GE(file->fd(), 0);
  EXPECT_EQ(file->path(), dir.File("a"));
  EXPECT_FALSE(file->direct());
}

TEST(PosixEnvTest, ShortReadAtEndOfFile) {
  ScratchDir dir;
  auto file = OpenFile(dir.File("a"), {.create = true});
  ASSERT_NE(file, nullptr);
  std::vector<uint8_t> data(5000, 7);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  std::vector<uint8_t> back(8192);
  size_t n = 0;
  ASSERT_TRUE(file->Read(4096, back.size(), back.data(), &n).ok());
  EXPECT_EQ(n, 5000u - 4096u);
  ASSERT_TRUE(file->Read(9000, back.size(), back.data(), &n).ok());
  EXPECT_EQ(n, 0u);
}

TEST(PosixEnvTest, DirectIoRejectsMisalignmentNamingWhat) {
  ScratchDir dir;
  auto opened = Env::Default()->OpenFile(dir.File("d"), {.create = true, .direct = true});
  if (!opened.ok() && opened.status().IsInvalidArgument()) {
    GTEST_SKIP() << "file system refuses O_DIRECT: " << opened.status().ToString();
  }
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  auto file = std::move(opened).value();
  EXPECT_TRUE(file->direct());
  auto buf = AlignedBuffer::Allocate(8192);
  ASSERT_TRUE(buf.ok());
  FillPattern(buf->data(), 0, 8192);
  ASSERT_TRUE(file->Write(0, buf->data(), 8192).ok());

  Status s = file->Write(512, buf->data(), 4096);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("offset 512"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset is not a multiple of 4096"), std::string::npos);
  EXPECT_NE(s.message().find(dir.File("d")), std::string::npos);

  size_t n = 0;
  s = file->Read(0, 1000, buf->data(), &n);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("length is not a multiple"), std::string::npos) << s.ToString();

  s = file->Read(0, 4096, buf->data() + 8, &n);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("buffer address is not a multiple"), std::string::npos);

  // Nothing was changed by the rejected write.
  ASSERT_TRUE(file->Read(0, 8192, buf->data(), &n).ok());
  EXPECT_EQ(n, 8192u);
  EXPECT_TRUE(MatchesPattern(buf->data(), 0, 8192));
}

TEST(PosixEnvTest, DirectShortReadAtEndOfFile) {
  ScratchDir dir;
  {
    auto plain = OpenFile(dir.File("d"), {.create = true});
    ASSERT_NE(plain, nullptr);
    std::vector<uint8_t> data(6000, 3);
    ASSERT_TRUE(plain->Write(0, data.data(), data.size()).ok());
  }
  auto opened = Env::Default()->OpenFile(dir.File("d"), {.direct = true});
  if (!opened.ok() && opened.status().IsInvalidArgument()) GTEST_SKIP() << "no O_DIRECT here";
  ASSERT_TRUE(opened.ok());
  auto buf = AlignedBuffer::Allocate(16384);
  ASSERT_TRUE(buf.ok());
  size_t n = 0;
  ASSERT_TRUE((*opened)->Read(0, 16384, buf->data(), &n).ok());
  EXPECT_EQ(n, 6000u);
}

TEST(PosixEnvTest, ErrorsNameFileAndOffset) {
  ScratchDir dir;
  auto missing = Env::Default()->OpenFile(dir.File("missing"), {});
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_NE(missing.status().message().find(dir.File("missing")), std::string::npos);

  auto file = OpenFile(dir.File("ro"), {.create = true});

  ASSERT_NE(file, nullptr);
  file.reset();
  auto ro = OpenFile(dir.File("ro"), {.read_only = true});
  ASSERT_NE(ro, nullptr);
  uint8_t byte = 1;
  Status s = ro->Write(12345, &byte, 1);
  EXPECT_TRUE(s.IsIOError());
  EXPECT_NE(s.message().find(dir.File("ro")), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset 12345"), std::string::npos) << s.ToString();

  auto bad = Env::Default()->OpenFile(dir.File("x"), {.create = true, .read_only = true});
  EXPECT_TRUE(bad.status().IsInvalidArgument());
}

TEST(PosixEnvTest, DirectoriesRenameDeleteList) {
  ScratchDir dir;
  Env* env = Env::Default();
  const std::string sub = dir.File("x/y/z");
  ASSERT_TRUE(env->CreateDirs(sub).ok());
  ASSERT_TRUE(env->CreateDirs(sub).ok());  // idempotent
  ASSERT_NE(OpenFile(sub + "/b", {.create = true}), nullptr);
  ASSERT_NE(OpenFile(sub + "/a", {.create = true}), nullptr);
  ASSERT_TRUE(env->SyncDir(sub).ok());
  auto names = env->ListDir(sub);
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(env->RenameFile(sub + "/a", sub + "/c").ok());
  EXPECT_FALSE(env->FileExists(sub + "/a"));
  EXPECT_TRUE(env->FileExists(sub + "/c"));
  ASSERT_TRUE(env->DeleteFile(sub + "/c").ok());
  EXPECT_TRUE(env->DeleteFile(sub + "/c").IsNotFound());
  EXPECT_TRUE(env->ListDir(dir.File("nope")).status().IsNotFound());
  EXPECT_FALSE(env->SyncDir(dir.File("nope")).ok());
  uint64_t t0 = env->NowMicros();
  EXPECT_GE(env->NowMicros(), t0);
}

TEST(AlignedTest, AllocateAlignsAndRounds) {
  auto buf = AlignedBuffer::Allocate(5000);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(buf->size(), 8192u);
  EXPECT_TRUE(IsAligned(reinterpret_cast<uintptr_t>(buf->data())));
  AlignedBuffer moved = std::move(buf).value();
  EXPECT_EQ(moved.size(), 8192u);
  EXPECT_EQ(AlignUp(4097), 8192u);
  EXPECT_EQ(AlignDown(4097), 4096u);
  EXPECT_TRUE(CheckDirectIo("read", "f", 4096, 4096, moved.data()).ok());
}

}  // namespace
}  // namespace strata::io
