// strata-test-labels: unit
// Where the kernel refuses io_uring (seccomp in containers, old kernels),
// IoThreads falls back to pread/pwrite with a warning, and asking for
// io_uring explicitly fails clearly. Simulated here by a seccomp filter that
// makes io_uring_setup fail with EPERM, installed in a forked child.
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <vector>

#include "io/aligned.h"
#include "io/io_threads.h"
#include "io/ring.h"
#include "tests/io/io_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::io {
namespace {

using strata::testing::ScratchDir;
using testing::FillPattern;
using testing::MatchesPattern;

// Makes io_uring_setup(2) fail with EPERM in this process from now on.
bool BlockIoUringSetup() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// Runs in the child: exit code 0 when every expectation held, else the
// number of the first that failed.
int FallbackScenario(const std::string& path) {
  if (!BlockIoUringSetup()) return 100;  // reported as a skip below
  if (!Ring::Create({}).status().IsUnavailable()) return 1;
  auto refused = IoThreads::Create({.backend = IoBackend::kUring});
  if (!refused.status().IsUnavailable()) return 2;
  auto io = IoThreads::Create({.threads = 2});  // kAuto
  if (!io.ok() || (*io)->backend() != IoBackend::kPsync) return 3;
  auto file = Env::Default()->OpenFile(path, {});
  if (!file.ok()) return 4;
  auto buf = AlignedBuffer::Allocate(8 * 4096);
  std::vector<IoRequest> reqs(8);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i] = {.op = IoRequest::Op::kRead,
               .file = file->get(),
               .offset = (7 - i) * 4096,
               .buf = buf->data() + i * 4096,
               .len = 4096};
  }
  if (!(*io)->SubmitAndWait(reqs).ok()) return 5;
  for (const IoRequest& req : reqs) {
    if (!MatchesPattern(static_cast<uint8_t*>(req.buf), req.offset, 4096)) return 6;
  }
  return 0;
}

TEST(IoThreadsFallbackTest, KernelRefusingIoUringFallsBackToPsync) {
  ScratchDir dir;
  const std::string path = dir.File("data");
  {
    auto file = Env::Default()->OpenFile(path, {.create = true});
    ASSERT_TRUE(file.ok());
    std::vector<uint8_t> data(8 * 4096);
    FillPattern(data.data(), 0, data.size());
    ASSERT_TRUE((*file)->Write(0, data.data(), data.size()).ok());
  }
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(FallbackScenario(path));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child died, status " << status;
  if (WEXITSTATUS(status) == 100) GTEST_SKIP() << "cannot install a seccomp filter here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "expectation number " << WEXITSTATUS(status) << " failed";
}

}  // namespace
}  // namespace strata::io
