// IoThreads: N I/O threads, each pinned to one core and owning one io_uring
// (io::Ring), that execute batches of caller-owned IoRequests submitted from
// any thread.
//
// Model (after Baidu's hierarchical GPU parameter server: one physical core
// per SSD, direct I/O). Cores come from topology: the NUMA node of the block
// device backing `topology_path` first, or an explicit list (`--io-cores`).
// A submission splits its batch into slices, one per I/O thread, and hands
// each slice to that thread through a bounded lock-free queue. The thread
// moves requests into its ring while the ring has room, submits them in one
// system call, and reaps completions; when the last request of a batch
// finishes, the batch's callback runs on that I/O thread. A full queue makes
// the submitter wait for room (backpressure); a full ring never blocks anyone,
// requests stay in the ring's bounded pending list.
//
// Backends: io_uring (kUring) or, where the kernel refuses io_uring (old
// kernel, seccomp in containers), one pread/pwrite call at a time per thread
// (kPsync); kAuto picks io_uring and falls back with a logged warning. Both
// give the same results. Each thread may own a BufferPool of aligned,
// NUMA-local buffers, registered with every ring as fixed buffers.
//
// Faults: with `env` a FaultEnv, each read, write and sync first passes its
// rules (BeforeIo), so injected errors appear as IOErrors naming the file and
// offset. Without one, nothing is consulted.
//
// Thread safety: Submit, SubmitAndWait and the buffer calls may be called from
// any number of threads at once. Ownership: requests, their buffers and their
// files belong to the caller and must stay alive and unchanged until the
// batch completes. Destruction completes requests already issued and cancels
// (status Unavailable) those not started; every callback runs before the
// destructor returns; a Submit from a callback during destruction gets
// FailedPrecondition. REQUIRES: no other thread calls Submit while the
// destructor runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/env.h"
#include "io/io_request.h"
#include "strata/status.h"

namespace strata::io {

class BufferPool;
class IoWorker;

enum class IoBackend : uint8_t { kAuto, kUring, kPsync };
const char* IoBackendName(IoBackend backend);

struct IoThreadsOptions {
  // I/O threads. 0: one per entry of `cores` when given, else one (one core
  // per SSD). More threads overlap more system-call work.
  uint32_t threads = 0;
  // Thread i runs on cores[i % size] (the `--io-cores` override). Empty:
  // chosen from topology.
  std::vector<int> cores;
  // Cores of the NUMA node of the block device backing this path come first.
  // Empty: any core this process may use.
  std::string topology_path;
  bool pin_threads = true;    // false: threads float (tests of unpinned runs)
  uint32_t ring_depth = 256;  // io_uring entries per thread: deeper queues, more overlap
  // io_uring: a request in the kernel this long is cancelled and done with
  // pread/pwrite on its I/O thread (0: never; see Ring). Shorter: a request
  // the kernel holds costs less; slow requests past it are done twice over.
  uint32_t request_deadline_ms = 1000;
  IoBackend backend = IoBackend::kAuto;
  // Fault hooks: a FaultEnv (Env::AsFaultEnv) injects into every request.
  Env* env = nullptr;
  // Per-thread pool of registered buffers (0: none).
  uint32_t buffers_per_thread = 0;
  size_t buffer_bytes = 64 * 1024;
};

class IoThreads {
 public:
  // InvalidArgument for bad options; Unavailable when backend kUring was
  // asked for and the kernel refuses io_uring.
  [[nodiscard]] static Result<std::unique_ptr<IoThreads>> Create(const IoThreadsOptions& options);
  ~IoThreads();
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  // Issues every request of `reqs` and calls `done(reqs)` once, on an I/O
  // thread, when all have completed (each with its status and bytes_done).
  // Returns InvalidArgument, issuing nothing, when a request is malformed
  // (ValidateIoRequest; the message names the request index, file and
  // offset). Waits only while a target thread's queue is full.
  [[nodiscard]] Status Submit(std::span<IoRequest> reqs,
                              std::function<void(std::span<IoRequest>)> done);
  // Issues all, waits for all; returns the first failed request's status
  // (in index order), every request's status filled in.
  [[nodiscard]] Status SubmitAndWait(std::span<IoRequest> reqs);
  // As Submit; the future yields what SubmitAndWait would return.
  [[nodiscard]] std::future<Status> SubmitAsync(std::span<IoRequest> reqs);

  // A registered, aligned buffer of buffer_bytes() from the pools (round
  // robin over threads), or nullptr when all are in use or there are none.
  uint8_t* AcquireBuffer();
  // REQUIRES: `buf` came from AcquireBuffer.
  void ReleaseBuffer(uint8_t* buf);
  size_t buffer_bytes() const;

  IoBackend backend() const { return backend_; }
  uint32_t threads() const { return static_cast<uint32_t>(workers_.size()); }
  // The core each thread was assigned (-1: not pinned).
  std::vector<int> cores() const;
  // Kernel thread ids of the I/O threads (for sched_getaffinity).
  std::vector<int> thread_ids() const;
  // NUMA node of the topology path's device, -1 when unknown.
  int numa_node() const { return numa_node_; }
  // Whether thread i's ring uses the pools as fixed buffers.
  bool fixed_buffers(uint32_t thread) const;
  // Requests cancelled at their deadline and done with pread/pwrite, over
  // all threads (0 with the pread/pwrite backend).
  uint64_t requests_redone() const;

 private:
  IoThreads() = default;
  Status SubmitOpen(std::span<IoRequest> reqs, std::function<void(std::span<IoRequest>)> done);

  IoBackend backend_ = IoBackend::kPsync;
  int numa_node_ = -1;
  std::vector<std::unique_ptr<BufferPool>> pools_;
  std::vector<std::unique_ptr<IoWorker>> workers_;
  std::atomic<uint32_t> next_thread_{0};
  std::atomic<uint32_t> next_pool_{0};
  std::atomic<bool> closing_{false};     // set by the destructor
  std::atomic<uint32_t> submitting_{0};  // Submit calls under way
};

}  // namespace strata::io
