// strata-test-labels: unit
#include "io/ring.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <vector>

#include "io/aligned.h"
#include "tests/io/io_test_util.h"
#include "tests/util/scratch_dir.h"

namespace strata::io {
namespace {

using strata::testing::ScratchDir;
using testing::FillPattern;
using testing::MatchesPattern;

class CollectSink : public CompletionSink {
 public:
  void OnComplete(IoRequest* req) override { done.push_back(req); }
  std::vector<IoRequest*> done;
};

class RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ring = Ring::Create({.depth = 4, .pending_max = 64});
    if (!ring.ok() && ring.status().IsUnavailable()) {
      GTEST_SKIP() << "kernel refuses io_uring: " << ring.status().ToString();
    }
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();
    ring_ = std::move(ring).value();
    auto file = Env::Default()->OpenFile(dir_.File("f"), {.create = true});
    ASSERT_TRUE(file.ok());
    file_ = std::move(file).value();
    std::vector<uint8_t> data(256 * 1024);
    FillPattern(data.data(), 0, data.size());
    ASSERT_TRUE(file_->Write(0, data.data(), data.size()).ok());
  }

  // Queues a 4 KiB read of page i (or of page n-1-i, `reverse`) into buf's
  // page i for each request.
  void EnqueuePageReads(std::vector<IoRequest>* reqs, uint8_t* buf, bool reverse) {
    const size_t n = reqs->size();
    for (size_t i = 0; i < n; ++i) {
      (*reqs)[i] = {.op = IoRequest::Op::kRead,
                    .file = file_.get(),
                    .offset = (reverse ? n - 1 - i : i) * 4096,
                    .buf = buf + i * 4096,
                    .len = 4096};
      ASSERT_TRUE(ring_->Enqueue(&(*reqs)[i]).ok());
    }
  }

  static void ExpectPagesRead(const std::vector<IoRequest>& reqs) {
    for (const IoRequest& req : reqs) {
      EXPECT_TRUE(req.status.ok()) << req.status.ToString();
      EXPECT_EQ(req.bytes_done, 4096u);
      EXPECT_TRUE(MatchesPattern(static_cast<uint8_t*>(req.buf), req.offset, 4096));
    }
  }

  // Polls until every queued request finished.
  void Drain() {
    while (!ring_->idle()) {
      auto n = ring_->Poll(1, &sink_);
      ASSERT_TRUE(n.ok()) << n.status().ToString();
    }
  }

  ScratchDir dir_;
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<File> file_;
  CollectSink sink_;
};

TEST_F(RingTest, FullRingQueuesInPendingListNothingLost) {
  std::vector<IoRequest> reqs(64);
  std::vector<uint8_t> buf(64 * 4096);
  EnqueuePageReads(&reqs, buf.data(), /*reverse=*/false);
  IoRequest extra{.op = IoRequest::Op::kRead, .file = file_.get(), .buf = buf.data(), .len = 1};
  EXPECT_TRUE(ring_->Enqueue(&extra).IsResourceExhausted());  // pending list bound
  EXPECT_EQ(ring_->pending(), 64u);
  Drain();
  ASSERT_EQ(sink_.done.size(), 64u);
  ExpectPagesRead(reqs);
}

TEST_F(RingTest, WriteFsyncAndShortReadAtEnd) {
  std::vector<uint8_t> out(1000, 0x5A);
  IoRequest write{.op = IoRequest::Op::kWrite,
                  .file = file_.get(),
                  .offset = 256 * 1024,
                  .buf = out.data(),
                  .len = 1000};
  IoRequest sync{.op = IoRequest::Op::kFdatasync, .file = file_.get()};
  ASSERT_TRUE(ring_->Enqueue(&write).ok());
  Drain();
  ASSERT_TRUE(ring_->Enqueue(&sync).ok());
  Drain();
  EXPECT_TRUE(write.status.ok() && sync.status.ok());
  std::vector<uint8_t> in(4096);
  IoRequest read{.op = IoRequest::Op::kRead,
                 .file = file_.get(),
                 .offset = 256 * 1024,
                 .buf = in.data(),
                 .len = 4096};
  ASSERT_TRUE(ring_->Enqueue(&read).ok());
  Drain();
  EXPECT_TRUE(read.status.ok());
  EXPECT_EQ(read.bytes_done, 1000u);
  EXPECT_EQ(in[999], 0x5A);
}

TEST_F(RingTest, ErrorsNameFileAndOffset) {
  auto ro = Env::Default()->OpenFile(dir_.File("f"), {.read_only = true});
  ASSERT_TRUE(ro.ok());
  uint8_t byte = 1;
  IoRequest write{
      .op = IoRequest::Op::kWrite, .file = ro->get(), .offset = 777, .buf = &byte, .len = 1};
  ASSERT_TRUE(ring_->Enqueue(&write).ok());
  Drain();
  EXPECT_TRUE(write.status.IsIOError());
  EXPECT_NE(write.status.message().find(dir_.File("f")), std::string::npos);
  EXPECT_NE(write.status.message().find("offset 777"), std::string::npos)
      << write.status.ToString();
}

TEST_F(RingTest, RegisteredFilesAndFixedBuffers) {
  auto buf = AlignedBuffer::Allocate(16 * 4096);
  ASSERT_TRUE(buf.ok());
  iovec region{buf->data(), buf->size()};
  Status reg = ring_->RegisterBuffers({&region, 1});
  if (!reg.ok()) GTEST_SKIP() << "cannot register buffers here: " << reg.ToString();
  EXPECT_TRUE(ring_->fixed_buffers());
  int fd = file_->fd();
  ASSERT_TRUE(ring_->RegisterFiles({&fd, 1}).ok());
  std::vector<IoRequest> reqs(16);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i] = {.op = IoRequest::Op::kRead,
               .file = file_.get(),
               .offset = (15 - i) * 4096,
               .buf = buf->data() + i * 4096,
               .len = 4096};
    ASSERT_TRUE(ring_->Enqueue(&reqs[i]).ok());
  }
  Drain();
  for (const IoRequest& req : reqs) {
    EXPECT_TRUE(req.status.ok()) << req.status.ToString();
    EXPECT_TRUE(MatchesPattern(static_cast<uint8_t*>(req.buf), req.offset, 4096));
  }
  ring_->UnregisterFiles();
  EXPECT_TRUE(ring_->RegisterBuffers({}).ok());
  EXPECT_FALSE(ring_->fixed_buffers());
}

TEST_F(RingTest, DestructorCancelsPending) {
  std::vector<uint8_t> buf(4096);
  IoRequest req{.op = IoRequest::Op::kRead, .file = file_.get(), .buf = buf.data(), .len = 4096};
  ASSERT_TRUE(ring_->Enqueue(&req).ok());
  ring_.reset();
  EXPECT_TRUE(req.status.IsUnavailable()) << req.status.ToString();
}

// A pipe nobody writes to: a read of it stays in the kernel until cancelled.
class NeverReadyPipe {
 public:
  NeverReadyPipe() { EXPECT_EQ(::pipe2(fds_, O_CLOEXEC), 0); }
  ~NeverReadyPipe() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int read_fd() const { return fds_[0]; }

 private:
  int fds_[2] = {-1, -1};
};

class RingDeadlineTest : public RingTest {
 protected:
  void SetUp() override {
    RingTest::SetUp();
    if (IsSkipped()) return;
    auto ring = Ring::Create({.depth = 4, .pending_max = 64, .request_deadline_ms = 20});
    ASSERT_TRUE(ring.ok()) << ring.status().ToString();
    ring_ = std::move(ring).value();
  }
};

TEST_F(RingDeadlineTest, HeldWriteIsCancelledAndDoneWithPwrite) {
  NeverReadyPipe pipe;
  ring_->SimulateHeldRequests(pipe.read_fd(), 1);
  std::vector<uint8_t> out(8192);
  FillPattern(out.data(), 1 << 20, out.size());  // the pattern of another offset
  IoRequest write{.op = IoRequest::Op::kWrite,
                  .file = file_.get(),
                  .offset = 0,
                  .buf = out.data(),
                  .len = 8192};
  std::vector<uint8_t> in(4096);
  IoRequest read{.op = IoRequest::Op::kRead,
                 .file = file_.get(),
                 .offset = 64 * 1024,
                 .buf = in.data(),
                 .len = 4096};
  ASSERT_TRUE(ring_->Enqueue(&write).ok());  // held by the kernel
  ASSERT_TRUE(ring_->Enqueue(&read).ok());   // completes on its own
  Drain();
  ASSERT_EQ(sink_.done.size(), 2u);
  EXPECT_TRUE(write.status.ok()) << write.status.ToString();
  EXPECT_EQ(write.bytes_done, 8192u);
  EXPECT_TRUE(read.status.ok()) << read.status.ToString();
  EXPECT_TRUE(MatchesPattern(in.data(), 64 * 1024, 4096));
  EXPECT_EQ(ring_->stats().deadline_cancels.load(), 1u);
  EXPECT_EQ(ring_->stats().requests_redone.load(), 1u);
  std::vector<uint8_t> check(8192);
  ASSERT_EQ(::pread(file_->fd(), check.data(), check.size(), 0), 8192);
  EXPECT_TRUE(MatchesPattern(check.data(), 1 << 20, check.size()));
  EXPECT_TRUE(ring_->idle());
}

TEST_F(RingDeadlineTest, HeldReadsAreCancelledAndDoneWithPread) {
  NeverReadyPipe pipe;
  ring_->SimulateHeldRequests(pipe.read_fd(), 3);
  std::vector<IoRequest> reqs(8);
  std::vector<uint8_t> buf(8 * 4096);
  EnqueuePageReads(&reqs, buf.data(), /*reverse=*/true);
  Drain();
  ASSERT_EQ(sink_.done.size(), reqs.size());
  ExpectPagesRead(reqs);
  EXPECT_EQ(ring_->stats().requests_redone.load(), 3u);
}

TEST_F(RingDeadlineTest, NothingRedoneWhenTheKernelAnswers) {
  std::vector<IoRequest> reqs(32);
  std::vector<uint8_t> buf(32 * 4096);
  EnqueuePageReads(&reqs, buf.data(), /*reverse=*/false);
  Drain();
  ExpectPagesRead(reqs);
  EXPECT_EQ(ring_->stats().deadline_cancels.load(), 0u);
  EXPECT_EQ(ring_->stats().requests_redone.load(), 0u);
}

TEST(RingCreateTest, RejectsBadDepth) {
  EXPECT_TRUE(Ring::Create({.depth = 0}).status().IsInvalidArgument());
  EXPECT_TRUE(Ring::Create({.depth = kRingDepthMax + 1}).status().IsInvalidArgument());
  EXPECT_TRUE(Ring::Create({.pending_max = 0}).status().IsInvalidArgument());
}

}  // namespace
}  // namespace strata::io
