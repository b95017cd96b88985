#include "strata/status.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "base/assert.h"
#include "base/log.h"
#include "strata/types.h"
#include "strata/version.h"

namespace strata {
namespace {

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, CodesAndMessages) {
  EXPECT_EQ(Status::InvalidArgument("x").ToString(), "InvalidArgument: x");
  EXPECT_TRUE(Status::NotFound("k").IsNotFound());
  EXPECT_TRUE(Status::IOError("f").IsIOError());
  EXPECT_TRUE(Status::Corruption("p").IsCorruption());
  EXPECT_TRUE(Status::ResourceExhausted("r").IsResourceExhausted());
  EXPECT_TRUE(Status::FailedPrecondition("c").IsFailedPrecondition());
  EXPECT_TRUE(Status::Unavailable("u").IsUnavailable());
  EXPECT_TRUE(Status::Internal("i").IsInternal());
  EXPECT_FALSE(Status::Internal("i").ok());
}

TEST(StatusTest, FromErrnoNamesTheOperation) {
  Status s = Status::FromErrno(ENOSPC, "pwrite /d/seg.0 at 4096");
  EXPECT_TRUE(s.IsIOError());
  EXPECT_NE(s.message().find("pwrite /d/seg.0 at 4096"), std::string::npos);
  EXPECT_NE(s.message().find("No space left"), std::string::npos);
}

TEST(StatusTest, WithContextPrefixes) {
  EXPECT_EQ(Status::NotFound("key 3").WithContext("table t").message(), "table t: key 3");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd argument " + std::to_string(x));
  return x / 2;
}

Status UseHalf(int x, int* out) {
  STRATA_ASSIGN_OR_RETURN(*out, Half(x));
  return Status::Ok();
}

TEST(ResultTest, ValueOrError) {
  Result<int> a = Half(8);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 4);
  Result<int> b = Half(3);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "odd argument 3");
  int out = 0;
  EXPECT_TRUE(UseHalf(10, &out).ok());
  EXPECT_EQ(out, 5);
  EXPECT_TRUE(UseHalf(7, &out).IsInvalidArgument());
  EXPECT_EQ(out, 5);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> b = Half(3);
  EXPECT_DEATH((void)b.value(), "Result::value\\(\\) on error");
}

TEST(AssertDeathTest, AssertAbortsWithMessage) {
  EXPECT_DEATH(STRATA_ASSERT(1 + 1 == 3, "arithmetic"),
               "assertion failed: 1 \\+ 1 == 3.*arithmetic");
}

TEST(LogTest, LevelControlsOutput) {
  SetLogLevel(LogLevel::kError);
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  SetLogLevel(LogLevel::kDebug);
  EXPECT_TRUE(LogEnabled(LogLevel::kInfo));
  testing::internal::CaptureStderr();
  STRATA_LOG_INFO("opened %s", "dir");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("opened dir"), std::string::npos);
  SetLogLevel(LogLevel::kWarn);
}

TEST(TypesTest, KeysSpanAll64Bits) {
  EXPECT_EQ(kKeyMax, ~Key{0});
  EXPECT_EQ(kKeyMin, Key{0});
}

TEST(VersionTest, VersionAndGpuCount) {
  EXPECT_STREQ(Version(), "0.1.0");
  EXPECT_GE(VisibleGpuCount(), 0);
  EXPECT_NE(BuildInfo().find("strata 0.1.0"), std::string::npos);
}

}  // namespace
}  // namespace strata
