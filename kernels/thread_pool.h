// ThreadPool: the host runner's workers. One process-wide pool (Shared())
// serves every host-runner table; ParallelFor splits [0, n) into chunks that
// the calling thread and up to `threads - 1` workers take from an atomic
// counter, and returns when every chunk ran. Several threads may call
// ParallelFor at once; their jobs share the workers.
//
// Thread safety: all methods are thread-safe. The pool owns its threads and
// joins them on destruction (at process exit for Shared()).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/mutex.h"

namespace strata::kernels {

class ThreadPool {
 public:
  using RangeFn = std::function<void(uint64_t begin, uint64_t end)>;

  // threads: total parallelism including callers (0: hardware threads).
  explicit ThreadPool(uint32_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool, created on first use with hardware threads.
  static ThreadPool& Shared();

  // Runs fn over [0, n) in chunks of `grain` keys on at most `threads`
  // threads (0: all), the caller included. Returns after every chunk ran.
  // REQUIRES: grain > 0.
  void ParallelFor(uint64_t n, uint64_t grain, uint32_t threads, const RangeFn& fn) EXCLUDES(mu_);

  uint32_t threads() const { return static_cast<uint32_t>(workers_.size()) + 1; }

 private:
  struct Job;
  void WorkerLoop() EXCLUDES(mu_);
  static void RunChunks(Job& job);

  base::Mutex mu_;
  base::CondVar cv_;
  std::deque<std::shared_ptr<Job>> queue_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace strata::kernels
