// The I/O thread's common part (pinning, queue, faults, batch accounting)
// and its two backends: io_uring (UringWorker) and pread/pwrite (PsyncWorker).
#include "io/io_worker.h"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "base/assert.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "io/aligned.h"
#include "io/limits.h"

namespace strata::io {

namespace {
// The worker whose thread this is (nullptr on other threads).
thread_local IoWorker* tls_worker = nullptr;
}  // namespace

IoWorker::IoWorker(const IoWorkerOptions& options) : options_(options), queue_(kIoQueueDepthMax) {}

IoWorker::~IoWorker() { Stop(); }

Status IoWorker::Start() {
  std::promise<Status> ready;
  std::future<Status> result = ready.get_future();
  thread_ = std::thread([this, &ready] { ThreadMain(&ready); });
  Status status = result.get();
  if (!status.ok()) {
    thread_.join();
  }
  return status;
}

void IoWorker::ThreadMain(std::promise<Status>* ready) {
  thread_id_.store(static_cast<int>(::gettid()), std::memory_order_release);
  base::NameThread(pthread_self(), "strata-io" + std::to_string(options_.index));
  tls_worker = this;
  if (options_.core >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(options_.core, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      ready->set_value(Status::FromErrno(errno, "I/O thread " + std::to_string(options_.index) +
                                                    ": sched_setaffinity to core " +
                                                    std::to_string(options_.core)));
      return;
    }
  }
  Status status = Init();
  const bool ok = status.ok();
  ready->set_value(std::move(status));  // `ready` dies once Start returns
  if (ok) Loop();
}

void IoWorker::Push(const IoSlice& slice) {
  // The handshakes below are read-modify-writes on both sides (no fences):
  // whichever side comes second in the atomic's order sees the other's work.
  while (!queue_.TryPush(slice)) {
    if (tls_worker != nullptr) {
      // A completion callback submitting from an I/O thread never waits (the
      // thread it would wait for may be itself): its own thread takes the slice.
      tls_worker->overflow_.push_back(slice);
      return;
    }
    space_waiters_.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = space_seq_.load(std::memory_order_seq_cst);
    if (queue_.TryPush(slice)) {
      space_waiters_.fetch_sub(1, std::memory_order_relaxed);
      break;
    }
    space_seq_.wait(seen, std::memory_order_seq_cst);
    space_waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (sleeping_.fetch_add(0, std::memory_order_seq_cst) != 0) Wake();
}

bool IoWorker::TryPop(IoSlice* slice) {
  if (!overflow_.empty()) {
    *slice = overflow_.front();
    overflow_.pop_front();
    return true;
  }
  if (!queue_.TryPop(slice)) return false;
  if (space_waiters_.fetch_add(0, std::memory_order_seq_cst) > 0) {
    space_seq_.fetch_add(1, std::memory_order_seq_cst);
    space_seq_.notify_all();
  }
  return true;
}

void IoWorker::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_seq_cst);
  Wake();
  thread_.join();
}

void IoWorker::OnComplete(IoRequest* req) {
  if (options_.fault != nullptr && IsSync(req->op) && req->status.ok()) {
    options_.fault->AfterSync(req->file->path());
  }
  auto* batch = static_cast<IoBatch*>(req->context);
  if (batch->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    batch->done(batch->reqs);
    delete batch;
  }
}

void IoWorker::Cancel(IoRequest* req) {
  req->bytes_done = 0;
  req->status = Status::Unavailable(
      "IoThreads shut down before the " + std::string(IoOpName(req->op)) + " of file " +
      req->file->path() + " at offset " + std::to_string(req->offset) + " was issued");
  OnComplete(req);
}

bool IoWorker::InjectFault(IoRequest* req) {
  FaultEnv* fault = options_.fault;
  if (fault == nullptr || !fault->has_rules()) return false;
  const FaultOp op = req->op == IoRequest::Op::kRead    ? FaultOp::kRead
                     : req->op == IoRequest::Op::kWrite ? FaultOp::kWrite
                                                        : FaultOp::kSync;
  size_t len = req->len;
  Status status = fault->BeforeIo(op, req->file->path(), req->offset, &len);
  if (!status.ok()) {
    if (op == FaultOp::kWrite && len < req->len) {  // a torn write: the prefix lands
      if (req->file->direct()) len = AlignDown(len);
      if (len > 0) ExecuteBlocking(req, static_cast<uint32_t>(len));
    }
    req->bytes_done = 0;
    req->status = std::move(status);
    OnComplete(req);
    return true;
  }
  if (len < req->len) {  // a short read: served here, synchronously
    if (req->file->direct()) len = AlignDown(len);
    ExecuteBlocking(req, static_cast<uint32_t>(len));
    OnComplete(req);
    return true;
  }
  return false;
}

void IoWorker::ExecuteBlocking(IoRequest* req, uint32_t len) { ExecuteIoRequestBlocking(req, len); }

namespace {

// pread/pwrite, one request at a time; sleeps on a futex when idle.
class PsyncWorker final : public IoWorker {
 public:
  explicit PsyncWorker(const IoWorkerOptions& options) : IoWorker(options) {}
  ~PsyncWorker() override { Stop(); }

 private:
  Status Init() override { return Status::Ok(); }

  void Loop() override {
    for (;;) {
      IoSlice slice;
      if (TryPop(&slice)) {
        const bool stopping = stop_.load(std::memory_order_acquire);
        for (uint32_t i = slice.begin; i < slice.end; ++i) {
          IoRequest* req = &slice.batch->reqs[i];
          if (stopping) {
            Cancel(req);
          } else if (!InjectFault(req)) {
            ExecuteBlocking(req, req->len);
            OnComplete(req);
          }
        }
        continue;
      }
      if (stop_.load(std::memory_order_acquire)) return;
      const uint32_t seen = wake_seq_.load(std::memory_order_seq_cst);
      sleeping_.exchange(1, std::memory_order_seq_cst);
      if (HasNoInput() && !stop_.load(std::memory_order_seq_cst)) {
        wake_seq_.wait(seen, std::memory_order_seq_cst);
      }
      sleeping_.store(0, std::memory_order_relaxed);
    }
  }

  void Wake() override {
    wake_seq_.fetch_add(1, std::memory_order_seq_cst);
    wake_seq_.notify_one();
  }

  std::atomic<uint32_t> wake_seq_{0};
};

// One io_uring per thread; an eventfd poll in the ring wakes it for new work.
class UringWorker final : public IoWorker {
 public:
  explicit UringWorker(const IoWorkerOptions& options) : IoWorker(options) {}
  ~UringWorker() override {
    Stop();
    if (event_fd_ >= 0) ::close(event_fd_);
  }
  bool fixed_buffers() const override { return fixed_buffers_.load(std::memory_order_acquire); }
  uint64_t requests_redone() const override {
    return requests_redone_.load(std::memory_order_relaxed);
  }

 private:
  Status Init() override {
    event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (event_fd_ < 0) return Status::FromErrno(errno, "eventfd for I/O thread");
    RingOptions ring_options;
    ring_options.depth = options_.ring_depth;
    ring_options.request_deadline_ms = options_.request_deadline_ms;
    ring_options.pending_max = kRingPendingMax;
    STRATA_ASSIGN_OR_RETURN(ring_, Ring::Create(ring_options));
    if (!options_.regions.empty()) {
      Status s = ring_->RegisterBuffers(options_.regions);
      if (s.ok()) {
        fixed_buffers_.store(true, std::memory_order_release);
      } else {
        STRATA_LOG_INFO("I/O thread %u: buffers not registered (%s); using plain reads",
                        options_.index, s.ToString().c_str());
      }
    }
    return ring_->ArmWakeup(event_fd_);
  }

  void Loop() override {
    IoSlice slice;
    bool have_slice = false;
    uint32_t next = 0;
    for (;;) {
      const bool stopping = stop_.load(std::memory_order_acquire);
      // Feed the ring while it has room; a full ring leaves work queued.
      while (ring_->pending_space() > 0) {
        if (!have_slice) {
          if (!TryPop(&slice)) break;
          have_slice = true;
          next = slice.begin;
        }
        IoRequest* req = &slice.batch->reqs[next++];
        if (next == slice.end) have_slice = false;
        if (stopping) {
          Cancel(req);
        } else if (!InjectFault(req)) {
          Status s = ring_->Enqueue(req);
          STRATA_ASSERT(s.ok(), "ring refused a request although it had room");
        }
      }
      const bool more_input = have_slice || !HasNoInput();
      if (stopping && !more_input && ring_->idle()) break;
      uint32_t wait = ring_->pending_space() == 0 ? 1 : 0;
      if (!more_input) {
        sleeping_.exchange(1, std::memory_order_seq_cst);
        if (HasNoInput() && !stop_.load(std::memory_order_seq_cst)) wait = 1;
      }
      Result<uint32_t> polled = ring_->Poll(wait, this);
      sleeping_.store(0, std::memory_order_relaxed);
      // Copied out: the ring dies with this thread, the count must not.
      requests_redone_.store(ring_->stats().requests_redone.load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
      if (!polled.ok()) {
        STRATA_LOG_ERROR("I/O thread %u: %s", options_.index, polled.status().ToString().c_str());
        std::this_thread::yield();
      }
    }
    ring_.reset();  // on this thread: the ring accepts submissions only from it
  }

  void Wake() override {
    uint64_t one = 1;
    ssize_t ignored = ::write(event_fd_, &one, sizeof(one));
    (void)ignored;
  }

  int event_fd_ = -1;
  std::unique_ptr<Ring> ring_;
  std::atomic<bool> fixed_buffers_{false};
  std::atomic<uint64_t> requests_redone_{0};
};

}  // namespace

std::unique_ptr<IoWorker> IoWorker::Make(IoBackend backend, const IoWorkerOptions& options) {
  if (backend == IoBackend::kPsync) return std::make_unique<PsyncWorker>(options);
  return std::make_unique<UringWorker>(options);
}

}  // namespace strata::io
