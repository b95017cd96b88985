// strata-test-labels: unit
// strata-test-timeout: 120
#include "io/io_threads.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "io/aligned.h"
#include "io/fault_env.h"
#include "io/topology.h"
#include "tests/io/io_test_util.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/thread_names.h"

namespace strata::io {
namespace {

using strata::testing::ScratchDir;
using testing::FillPattern;
using testing::MatchesPattern;

constexpr uint64_t kFileBytes = 1 << 20;

struct Uring {
  static constexpr IoBackend kBackend = IoBackend::kUring;
};
struct Psync {
  static constexpr IoBackend kBackend = IoBackend::kPsync;
};

template <typename B>
class IoThreadsTest : public ::testing::Test {
 protected:
  // Creates IoThreads of this backend; skips when the kernel refuses io_uring.
  std::unique_ptr<IoThreads> Make(IoThreadsOptions options = {}) {
    options.backend = B::kBackend;
    auto io = IoThreads::Create(options);
    if (!io.ok() && io.status().IsUnavailable()) {
      skip_reason_ = io.status().ToString();
      return nullptr;
    }
    EXPECT_TRUE(io.ok()) << io.status().ToString();
    if (!io.ok()) return nullptr;
    EXPECT_EQ((*io)->backend(), B::kBackend);
    return std::move(io).value();
  }

  // A file of kFileBytes pattern bytes, opened with O_DIRECT when possible.
  std::unique_ptr<File> PatternFile(Env* env, const std::string& name, bool direct = true) {
    const std::string path = dir_.File(name);
    {
      auto file = Env::Default()->OpenFile(path, {.create = true});
      EXPECT_TRUE(file.ok());
      std::vector<uint8_t> data(kFileBytes);
      FillPattern(data.data(), 0, data.size());
      EXPECT_TRUE((*file)->Write(0, data.data(), data.size()).ok());
    }
    auto file = env->OpenFile(path, {.direct = direct});
    if (!file.ok() && direct) return PatternFile(env, name, false);  // no O_DIRECT here
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    return file.ok() ? std::move(file).value() : nullptr;
  }

  ScratchDir dir_;
  std::string skip_reason_;
};

using Backends = ::testing::Types<Uring, Psync>;
TYPED_TEST_SUITE(IoThreadsTest, Backends);

#define MAKE_OR_SKIP(io, ...)                                          \
  auto io = this->Make(__VA_ARGS__);                                   \
  if (io == nullptr && !this->skip_reason_.empty()) {                  \
    GTEST_SKIP() << "kernel refuses io_uring: " << this->skip_reason_; \
  }                                                                    \
  ASSERT_NE(io, nullptr)

TYPED_TEST(IoThreadsTest, RandomReadsMatchFileContent) {
  MAKE_OR_SKIP(io, {.threads = 2});
  auto file = this->PatternFile(Env::Default(), "data");
  auto buf = AlignedBuffer::Allocate(256 * 4096);
  ASSERT_TRUE(buf.ok());
  std::mt19937_64 rng(1);
  std::vector<IoRequest> reqs(256);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i] = IoRequest{.op = IoRequest::Op::kRead,
                        .file = file.get(),
                        .offset = (rng() % (kFileBytes / 4096)) * 4096,
                        .buf = buf->data() + i * 4096,
                        .len = 4096};
  }
  ASSERT_TRUE(io->SubmitAndWait(reqs).ok());
  for (const IoRequest& req : reqs) {
    ASSERT_TRUE(req.status.ok()) << req.status.ToString();
    EXPECT_EQ(req.bytes_done, 4096u);
    EXPECT_TRUE(MatchesPattern(static_cast<uint8_t*>(req.buf), req.offset, 4096));
  }
}

TYPED_TEST(IoThreadsTest, WritesMatchModel) {
  MAKE_OR_SKIP(io, {.threads = 3, .ring_depth = 8});
  auto file = this->PatternFile(Env::Default(), "data");
  std::unordered_map<uint64_t, uint8_t> model;  // page -> fill byte written last
  auto buf = AlignedBuffer::Allocate(64 * 4096);
  ASSERT_TRUE(buf.ok());
  std::mt19937_64 rng(2);
  for (int round = 0; round < 20; ++round) {
    std::vector<IoRequest> reqs;
    std::unordered_map<uint64_t, bool> used;
    for (int i = 0; i < 64; ++i) {
      uint64_t page = rng() % (kFileBytes / 4096);
      if (used[page]) continue;  // one write per page per batch
      used[page] = true;
      auto fill = static_cast<uint8_t>(rng());
      uint8_t* p = buf->data() + reqs.size() * 4096;
      std::memset(p, fill, 4096);
      model[page] = fill;
      reqs.push_back({.op = IoRequest::Op::kWrite,
                      .file = file.get(),
                      .offset = page * 4096,
                      .buf = p,
                      .len = 4096});
    }
    ASSERT_TRUE(io->SubmitAndWait(reqs).ok());
  }
  IoRequest sync{.op = IoRequest::Op::kFdatasync, .file = file.get()};
  ASSERT_TRUE(io->SubmitAndWait({&sync, 1}).ok());
  auto page = AlignedBuffer::Allocate(4096);
  for (uint64_t p = 0; p < kFileBytes / 4096; ++p) {
    size_t n = 0;
    ASSERT_TRUE(file->Read(p * 4096, 4096, page->data(), &n).ok());
    auto it = model.find(p);
    if (it == model.end()) {
      EXPECT_TRUE(MatchesPattern(page->data(), p * 4096, 4096)) << "page " << p;
    } else {
      EXPECT_EQ(page->data()[0], it->second) << "page " << p;
      EXPECT_EQ(page->data()[4095], it->second) << "page " << p;
    }
  }
}

TYPED_TEST(IoThreadsTest, ShortReadAtEndOfFileReported) {
  MAKE_OR_SKIP(io);
  const std::string path = this->dir_.File("short");
  {
    auto f = Env::Default()->OpenFile(path, {.create = true});
    std::vector<uint8_t> data(6000);
    FillPattern(data.data(), 0, data.size());
    ASSERT_TRUE((*f)->Write(0, data.data(), data.size()).ok());
  }
  for (bool direct : {false, true}) {
    auto file = Env::Default()->OpenFile(path, {.direct = direct});
    if (!file.ok() && direct) continue;
    ASSERT_TRUE(file.ok());
    auto buf = AlignedBuffer::Allocate(3 * 8192);
    IoRequest reqs[2] = {
        {.op = IoRequest::Op::kRead,
         .file = file->get(),
         .offset = 0,
         .buf = buf->data(),
         .len = 8192},
        {.op = IoRequest::Op::kRead,
         .file = file->get(),
         .offset = 8192,
         .buf = buf->data() + 8192,
         .len = 8192},
    };
    ASSERT_TRUE(io->SubmitAndWait(reqs).ok());
    EXPECT_EQ(reqs[0].bytes_done, 6000u) << "direct=" << direct;
    EXPECT_TRUE(MatchesPattern(buf->data(), 0, 6000));
    EXPECT_EQ(reqs[1].bytes_done, 0u) << "direct=" << direct;
  }
}

TYPED_TEST(IoThreadsTest, MisalignedRequestRejectedIssuingNothing) {
  MAKE_OR_SKIP(io);
  auto file = this->PatternFile(Env::Default(), "data");
  if (!file->direct()) GTEST_SKIP() << "file system refuses O_DIRECT";
  auto buf = AlignedBuffer::Allocate(2 * 4096);
  std::memset(buf->data(), 0xAB, 2 * 4096);
  IoRequest reqs[2] = {
      {.op = IoRequest::Op::kWrite,
       .file = file.get(),
       .offset = 0,
       .buf = buf->data(),
       .len = 4096},
      {.op = IoRequest::Op::kWrite,
       .file = file.get(),
       .offset = 4096 + 512,
       .buf = buf->data() + 4096,
       .len = 4096},
  };
  Status s = io->SubmitAndWait(reqs);
  EXPECT_TRUE(s.IsInvalidArgument());
  EXPECT_NE(s.message().find("request 1"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset 4608"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(file->path()), std::string::npos) << s.ToString();
  // The aligned first request was not issued either.
  size_t n = 0;
  ASSERT_TRUE(file->Read(0, 4096, buf->data(), &n).ok());
  EXPECT_TRUE(MatchesPattern(buf->data(), 0, 4096));

  IoRequest no_file{.op = IoRequest::Op::kRead, .buf = buf->data(), .len = 4096};
  EXPECT_TRUE(io->SubmitAndWait({&no_file, 1}).IsInvalidArgument());
}

TYPED_TEST(IoThreadsTest, InjectedEioNamesFileAndOffset) {
  FaultEnv env(Env::Default());
  MAKE_OR_SKIP(io, {.threads = 1, .env = &env});
  auto file = this->PatternFile(&env, "data.sst");
  ASSERT_TRUE(
      env.AddRule(
             {.op = FaultOp::kRead, .path_substring = "data.sst", .nth_call = 3, .times_max = 1})
          .ok());
  auto buf = AlignedBuffer::Allocate(4 * 4096);
  std::vector<IoRequest> reqs(4);
  for (size_t i = 0; i < 4; ++i) {
    reqs[i] = {.op = IoRequest::Op::kRead,
               .file = file.get(),
               .offset = 8192 * (i + 1),
               .buf = buf->data() + 4096 * i,
               .len = 4096};
  }
  Status s = io->SubmitAndWait(reqs);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.message().find(file->path()), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("offset 24576"), std::string::npos) << s.ToString();
  EXPECT_TRUE(reqs[0].status.ok() && reqs[1].status.ok() && reqs[3].status.ok());
  EXPECT_TRUE(reqs[2].status.IsIOError());
  EXPECT_TRUE(MatchesPattern(buf->data() + 3 * 4096, reqs[3].offset, 4096));

  // Short reads and ENOSPC on writes pass through the same hooks.
  env.ClearRules();
  ASSERT_TRUE(
      env.AddRule({.op = FaultOp::kRead, .kind = FaultKind::kShortRead, .short_read_bytes = 4096})
          .ok());
  ASSERT_TRUE(env.AddRule({.op = FaultOp::kWrite, .error_number = ENOSPC}).ok());
  IoRequest more[2] = {
      {.op = IoRequest::Op::kRead,
       .file = file.get(),
       .offset = 0,
       .buf = buf->data(),
       .len = 8192},
      {.op = IoRequest::Op::kWrite,
       .file = file.get(),
       .offset = 65536,
       .buf = buf->data() + 8192,
       .len = 4096},
  };
  s = io->SubmitAndWait(more);
  EXPECT_TRUE(more[0].status.ok());
  EXPECT_EQ(more[0].bytes_done, 4096u);
  EXPECT_NE(more[1].status.message().find("No space left"), std::string::npos)
      << more[1].status.ToString();
  EXPECT_NE(more[1].status.message().find("offset 65536"), std::string::npos);
}

TYPED_TEST(IoThreadsTest, EachThreadPinnedToItsCore) {
  std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  std::vector<int> cores = {allowed.back(), allowed.front()};
  MAKE_OR_SKIP(io, {.cores = cores});
  ASSERT_EQ(io->threads(), 2u);
  EXPECT_EQ(io->cores(), cores);
  std::vector<int> tids = io->thread_ids();
  for (size_t i = 0; i < tids.size(); ++i) {
    cpu_set_t set;
    CPU_ZERO(&set);
    ASSERT_EQ(sched_getaffinity(tids[i], sizeof(set), &set), 0);
    EXPECT_EQ(CPU_COUNT(&set), 1) << "thread " << i;
    EXPECT_TRUE(CPU_ISSET(cores[i], &set)) << "thread " << i;
    // Named for top -H, perf and gdb.
    EXPECT_EQ(strata::testing::ThreadName(tids[i]), "strata-io" + std::to_string(i));
  }
  // Cores this process may not use are refused.
  IoThreadsOptions bad;
  bad.cores = {CPU_SETSIZE - 1};
  EXPECT_TRUE(IoThreads::Create(bad).status().IsInvalidArgument());
}

TYPED_TEST(IoThreadsTest, ManyConcurrentSubmittersSmallRing) {
  MAKE_OR_SKIP(io, {.threads = 2, .ring_depth = 2});
  auto file = this->PatternFile(Env::Default(), "data");
  constexpr int kSubmitters = 8;
  constexpr int kRounds = 40;
  constexpr int kPagesEach = (kFileBytes / 4096) / kSubmitters;  // disjoint page ranges
  std::atomic<int> failures{0};
  std::vector<std::thread> submitters;
  for (int t = 0; t < kSubmitters; ++t) {
    submitters.emplace_back([&, t] {
      auto buf = AlignedBuffer::Allocate(kPagesEach * 4096);
      for (int round = 0; round < kRounds; ++round) {
        std::vector<IoRequest> reqs(kPagesEach);
        for (int i = 0; i < kPagesEach; ++i) {
          const uint64_t page = uint64_t(t) * kPagesEach + i;
          uint8_t* p = buf->data() + i * 4096;
          std::memset(p, (round + t + i) & 0xFF, 4096);
          reqs[i] = {.op = IoRequest::Op::kWrite,
                     .file = file.get(),
                     .offset = page * 4096,
                     .buf = p,
                     .len = 4096};
        }
        if (!io->SubmitAndWait(reqs).ok()) ++failures;
        std::memset(buf->data(), 0, kPagesEach * 4096);
        for (auto& req : reqs) req.op = IoRequest::Op::kRead;
        if (!io->SubmitAndWait(reqs).ok()) ++failures;
        for (int i = 0; i < kPagesEach; ++i) {
          const uint8_t want = (round + t + i) & 0xFF;
          if (reqs[i].bytes_done != 4096 || buf->data()[i * 4096] != want ||
              buf->data()[i * 4096 + 4095] != want) {
            ++failures;
          }
        }
      }
    });
  }
  for (auto& s : submitters) s.join();
  EXPECT_EQ(failures.load(), 0);
}

TYPED_TEST(IoThreadsTest, ShutdownCompletesOrCancelsEveryRequest) {
  MAKE_OR_SKIP(io, {.threads = 2, .ring_depth = 4});
  auto file = this->PatternFile(Env::Default(), "data");
  constexpr int kBatches = 64;
  constexpr int kPerBatch = 32;
  auto buf = AlignedBuffer::Allocate(kPerBatch * 4096);
  std::vector<std::vector<IoRequest>> batches(kBatches);
  std::atomic<int> callbacks{0};
  std::atomic<int> completed{0};
  std::atomic<int> cancelled{0};
  for (auto& reqs : batches) {
    reqs.resize(kPerBatch);
    for (int i = 0; i < kPerBatch; ++i) {
      reqs[i] = {.op = IoRequest::Op::kRead,
                 .file = file.get(),
                 .offset = uint64_t(i) * 4096,
                 .buf = buf->data() + i * 4096,
                 .len = 4096};
    }
    ASSERT_TRUE(io->Submit(reqs, [&](std::span<IoRequest> done) {
                    for (const IoRequest& r : done) {
                      if (r.status.ok()) ++completed;
                      if (r.status.IsUnavailable()) ++cancelled;
                    }
                    ++callbacks;
                  }).ok());
  }
  io.reset();  // requests still queued and in flight
  EXPECT_EQ(callbacks.load(), kBatches);
  EXPECT_EQ(completed.load() + cancelled.load(), kBatches * kPerBatch);
}

TYPED_TEST(IoThreadsTest, FutureAndEmptyBatchAndSync) {
  MAKE_OR_SKIP(io);
  auto file = this->PatternFile(Env::Default(), "data");
  auto buf = AlignedBuffer::Allocate(4096);
  IoRequest reqs[3] = {
      {.op = IoRequest::Op::kRead,
       .file = file.get(),
       .offset = 4096,
       .buf = buf->data(),
       .len = 4096},
      {.op = IoRequest::Op::kFsync, .file = file.get()},
      {.op = IoRequest::Op::kFdatasync, .file = file.get()},
  };
  std::future<Status> done = io->SubmitAsync(reqs);
  EXPECT_TRUE(done.get().ok());
  EXPECT_TRUE(MatchesPattern(buf->data(), 4096, 4096));
  EXPECT_TRUE(io->SubmitAndWait({}).ok());
}

TYPED_TEST(IoThreadsTest, RegisteredBufferPool) {
  MAKE_OR_SKIP(io, {.threads = 2, .buffers_per_thread = 4, .buffer_bytes = 8192});
  auto file = this->PatternFile(Env::Default(), "data");
  std::vector<uint8_t*> bufs;
  while (uint8_t* b = io->AcquireBuffer()) bufs.push_back(b);
  ASSERT_EQ(bufs.size(), 8u);
  EXPECT_EQ(io->buffer_bytes(), 8192u);
  std::vector<IoRequest> reqs(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    reqs[i] = {.op = IoRequest::Op::kRead,
               .file = file.get(),
               .offset = i * 8192,
               .buf = bufs[i],
               .len = 8192};
  }
  ASSERT_TRUE(io->SubmitAndWait(reqs).ok());
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_TRUE(MatchesPattern(bufs[i], i * 8192, 8192));
    io->ReleaseBuffer(bufs[i]);
  }
  EXPECT_NE(io->AcquireBuffer(), nullptr);
}

// Completion callbacks that submit more work than a queue holds must not
// deadlock the I/O thread they run on.
TYPED_TEST(IoThreadsTest, CallbacksSubmittingMoreThanAQueueHolds) {
  MAKE_OR_SKIP(io, {.threads = 1, .ring_depth = 4});
  auto file = this->PatternFile(Env::Default(), "data");
  constexpr int kFollowUps = 3000;  // more than kIoQueueDepthMax slices
  auto buf = AlignedBuffer::Allocate(4096);
  std::vector<IoRequest> follow(kFollowUps);
  for (auto& req : follow) {
    req = {.op = IoRequest::Op::kRead,
           .file = file.get(),
           .offset = 4096,
           .buf = buf->data(),
           .len = 4096};
  }
  std::atomic<int> finished{0};
  std::atomic<int> failed_submits{0};
  IoRequest first{.op = IoRequest::Op::kRead, .file = file.get(), .buf = buf->data(), .len = 4096};
  auto all_done = std::make_shared<std::promise<void>>();
  ASSERT_TRUE(io->Submit({&first, 1}, [&](std::span<IoRequest>) {
                  for (auto& req : follow) {
                    Status s = io->Submit({&req, 1}, [&](std::span<IoRequest> r) {
                      if (r[0].status.ok() && ++finished == kFollowUps) all_done->set_value();
                    });
                    if (!s.ok()) ++failed_submits;
                  }
                }).ok());
  all_done->get_future().wait();
  EXPECT_EQ(failed_submits.load(), 0);
  EXPECT_EQ(finished.load(), kFollowUps);
}

TEST(IoThreadsAutoTest, AutoPicksAWorkingBackend) {
  auto io = IoThreads::Create({});
  ASSERT_TRUE(io.ok()) << io.status().ToString();
  EXPECT_NE((*io)->backend(), IoBackend::kAuto);
  EXPECT_EQ((*io)->threads(), 1u);
  EXPECT_TRUE(IoThreads::Create({.ring_depth = 0}).status().IsInvalidArgument());
  EXPECT_TRUE(IoThreads::Create({.topology_path = "/no/such/path"}).status().IsNotFound());
}

}  // namespace
}  // namespace strata::io
