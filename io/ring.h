// Ring: one io_uring (liburing), used by exactly one thread, that issues
// caller-owned IoRequests in batches and reaps their completions.
//
// Enqueue() never blocks: a request goes to a bounded pending list, and
// Poll() moves pending requests into the submission queue as slots free up,
// submits them with one system call, optionally waits, and reaps every
// completion, calling the sink once per finished request. Partial transfers
// are resubmitted for the rest; a read that returns 0 bytes (or, on an
// O_DIRECT file, an unaligned count) ends at the end of the file. Buffers
// inside a registered region use the fixed-buffer opcodes, fds in the
// registered file table use IOSQE_FIXED_FILE.
//
// Deadline: with request_deadline_ms set, a request in the kernel longer
// than that is cancelled (IORING_OP_ASYNC_CANCEL) and, once the kernel
// confirms the cancel, done again with pread/pwrite/fsync on the calling
// thread: a request held where cancel reaches it (io-wq's queue, a poll)
// costs the deadline in latency, not a hang. A request that completes while
// its cancel is in the kernel keeps its own result. A cancel the kernel
// cannot honour (-ENOENT, -EALREADY) leaves the request in flight, cancelled
// again at each deadline: its buffer may still be in the kernel's hands.
// Counted in stats(); each case logged once per ring. docs/io.md, "Requests
// the kernel holds".
//
// Thread safety: none; a Ring belongs to the thread that created it (the
// ring is set up with IORING_SETUP_SINGLE_ISSUER where the kernel has it).
// Ownership: requests and their buffers stay the caller's and must outlive
// their completion; the destructor waits for requests still in flight and
// completes pending ones with status Unavailable.
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "io/io_request.h"
#include "io/limits.h"
#include "strata/status.h"

namespace strata::io {

struct RingOptions {
  uint32_t depth = 256;         // submission queue entries; more overlap, more kernel memory
  uint32_t pending_max = 4096;  // requests held back when the submission queue is full
  // A request in the kernel this long is cancelled and done with pread/pwrite
  // (0: never). Short: a held request costs less; too short: slow requests
  // are done twice over (harmless, they are idempotent, but slower).
  uint32_t request_deadline_ms = 0;
};

// Counts of the deadline path; readable from any thread.
struct RingStats {
  std::atomic<uint64_t> deadline_cancels{0};  // cancels sent for overdue requests
  std::atomic<uint64_t> requests_redone{0};   // cancelled requests done with pread/pwrite
  std::atomic<uint64_t> cancels_missed{0};    // cancels that found the request running or gone
};

// Receives finished requests (status and bytes_done set).
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  virtual void OnComplete(IoRequest* req) = 0;
};

class Ring {
 public:
  // Unavailable when the kernel refuses io_uring (old kernel, seccomp).
  [[nodiscard]] static Result<std::unique_ptr<Ring>> Create(const RingOptions& options);
  ~Ring();
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  // Registers memory regions for fixed-buffer I/O (replacing earlier ones).
  // Fails (leaving none registered) when the kernel or RLIMIT_MEMLOCK refuses.
  [[nodiscard]] Status RegisterBuffers(std::span<const iovec> regions);
  // Registers file descriptors; requests on them skip the per-call fd lookup.
  // REQUIRES: no request on a registered fd in flight.
  [[nodiscard]] Status RegisterFiles(std::span<const int> fds);
  void UnregisterFiles();

  // Queues `req` (validated by the caller: ValidateIoRequest). Never blocks;
  // ResourceExhausted when the pending list holds pending_max requests.
  [[nodiscard]] Status Enqueue(IoRequest* req);
  // Submits what is queued, waits until at least `wait_min` completions
  // (requests or a wakeup) arrived, and reaps all available completions.
  // Returns the number of requests finished.
  [[nodiscard]] Result<uint32_t> Poll(uint32_t wait_min, CompletionSink* sink);

  // Keeps a poll on `event_fd` armed, so a Poll waiting for completions
  // returns when another thread writes to it. The Ring drains the eventfd.
  [[nodiscard]] Status ArmWakeup(int event_fd);

  // For tests of the deadline: the next `count` reads and writes are issued
  // as a read of `never_ready_fd` (a pipe nobody writes to) instead of their
  // own, so the kernel holds them until they are cancelled.
  void SimulateHeldRequests(int never_ready_fd, uint32_t count) {
    held_fd_ = never_ready_fd;
    held_count_ = count;
  }

  const RingStats& stats() const { return stats_; }
  uint32_t in_flight() const { return in_flight_; }
  uint32_t pending() const { return static_cast<uint32_t>(pending_.size()); }
  // Room left in the pending list (0 when partial transfers requeued by
  // Poll pushed it past pending_max, which they may by up to `depth`).
  uint32_t pending_space() const {
    return pending() >= options_.pending_max ? 0 : options_.pending_max - pending();
  }
  bool idle() const { return in_flight_ == 0 && pending_.empty(); }
  bool fixed_buffers() const { return !regions_.empty(); }

 private:
  explicit Ring(const RingOptions& options) : options_(options) {}
  // Fills submission queue entries from the pending list; returns how many.
  uint32_t Prepare();
  void PrepareOne(io_uring_sqe* sqe, IoRequest* req);
  void Finish(IoRequest* req, int res, CompletionSink* sink, uint32_t* finished);
  // A completion of a request (`data` its user_data) or of a cancel.
  void Reap(uint64_t data, int res, CompletionSink* sink, uint32_t* finished);
  // The list of requests in the kernel, oldest first.
  void Link(IoRequest* req, uint64_t now_ns);
  void Unlink(IoRequest* req);
  // Sends a cancel for each request past its deadline; true when it did.
  bool CancelOverdue(uint64_t now_ns);
  // Waits as io_uring_submit_and_wait, up to the oldest request's deadline.
  int SubmitAndWait(unsigned wait);
  int FixedBufferIndex(const void* buf, size_t len) const;
  void DrainForShutdown();

  const RingOptions options_;
  io_uring ring_{};
  bool ring_ready_ = false;
  uint32_t in_flight_ = 0;  // requests in the kernel (not the wakeup poll)
  uint32_t in_flight_max_ = 0;
  std::deque<IoRequest*> pending_;
  std::vector<iovec> regions_;
  std::vector<int> fd_slot_;  // fd -> registered slot, -1 when unregistered
  int wakeup_fd_ = -1;
  bool wakeup_armed_ = false;
  bool wakeup_in_kernel_ = false;
  uint32_t cancels_in_kernel_ = 0;
  IoRequest* oldest_ = nullptr;  // requests in the kernel, by issue time
  IoRequest* newest_ = nullptr;
  bool redo_logged_ = false;
  bool miss_logged_ = false;
  int held_fd_ = -1;  // SimulateHeldRequests
  uint32_t held_count_ = 0;
  uint64_t held_sink_ = 0;  // where a simulated held read would land
  RingStats stats_;
};

}  // namespace strata::io
