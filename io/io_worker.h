// IoWorker: one I/O thread of io::IoThreads (internal to io/). It is pinned
// to its core, owns a bounded lock-free queue of batch slices fed by any
// number of submitters, and executes them with its backend: an io::Ring
// (io_uring) or pread/pwrite one request at a time.
//
// Thread safety: Push and Stop may be called from any thread; everything
// else runs on the worker's own thread. Push from an I/O thread (a completion
// callback submitting more work) never waits: when the target queue is full
// the calling I/O thread keeps the slice in its own overflow list. Ownership: batches are created
// by IoThreads::Submit and deleted by the worker that completes their last request, after running
// their callback.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "io/bounded_queue.h"
#include "io/fault_env.h"
#include "io/io_request.h"
#include "io/io_threads.h"
#include "io/ring.h"

namespace strata::io {

// One Submit call: its requests and its completion callback.
struct IoBatch {
  std::span<IoRequest> reqs;
  std::function<void(std::span<IoRequest>)> done;
  std::atomic<size_t> remaining{0};
};

// A contiguous part of a batch given to one I/O thread.
struct IoSlice {
  IoBatch* batch = nullptr;
  uint32_t begin = 0;
  uint32_t end = 0;
};

struct IoWorkerOptions {
  uint32_t index = 0;
  int core = -1;  // -1: not pinned
  FaultEnv* fault = nullptr;
  uint32_t ring_depth = 256;
  uint32_t request_deadline_ms = 0;  // RingOptions::request_deadline_ms
  std::vector<iovec> regions;        // buffer pools to register with the ring
};

class IoWorker : public CompletionSink {
 public:
  static std::unique_ptr<IoWorker> Make(IoBackend backend, const IoWorkerOptions& options);
  ~IoWorker() override;

  // Starts the thread and returns once it is pinned and its backend is set
  // up (or failed to be).
  [[nodiscard]] Status Start();
  // Queues a slice; waits while the queue is full.
  void Push(const IoSlice& slice);
  // Cancels what has not started, finishes what has, joins the thread.
  void Stop();

  int core() const { return options_.core; }
  int thread_id() const { return thread_id_.load(std::memory_order_acquire); }
  virtual bool fixed_buffers() const { return false; }
  // Requests its ring cancelled at their deadline and did with pread/pwrite.
  virtual uint64_t requests_redone() const { return 0; }

  // Finished request: fault bookkeeping, then the batch's accounting.
  void OnComplete(IoRequest* req) override;

 protected:
  explicit IoWorker(const IoWorkerOptions& options);
  virtual Status Init() = 0;  // on the worker thread, after pinning
  virtual void Loop() = 0;    // returns after Stop, with nothing in flight
  virtual void Wake() = 0;    // makes a sleeping Loop look at its queue

  // Next slice: overflow first, then the queue. Worker thread only.
  bool TryPop(IoSlice* slice);
  bool HasNoInput() const { return overflow_.empty() && queue_.Empty(); }
  // Completes `req` as cancelled by shutdown.
  void Cancel(IoRequest* req);
  // Applies the fault rules; true when `req` was completed by them.
  bool InjectFault(IoRequest* req);
  // Executes `req` with pread/pwrite/fsync, moving at most `len` bytes.
  static void ExecuteBlocking(IoRequest* req, uint32_t len);

  const IoWorkerOptions options_;
  BoundedQueue<IoSlice> queue_;
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> sleeping_{0};  // 1 while the loop waits for work
  // Slices submitted by completion callbacks on this thread while the target
  // queue was full. Worker thread only; bounded by what callbacks submit.
  std::deque<IoSlice> overflow_;

 private:
  void ThreadMain(std::promise<Status>* ready);

  std::thread thread_;
  std::atomic<int> thread_id_{-1};
  std::atomic<uint32_t> space_seq_{0};      // bumped when a slot frees up
  std::atomic<uint32_t> space_waiters_{0};  // submitters waiting for a slot
};

}  // namespace strata::io
