#include "kernels/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "base/thread_name.h"

namespace strata::kernels {

struct ThreadPool::Job {
  const RangeFn* fn = nullptr;
  uint64_t n = 0;
  uint64_t grain = 0;
  uint64_t chunks = 0;
  uint32_t helpers_max = 0;          // workers allowed to join
  std::atomic<uint32_t> helpers{0};  // workers that joined
  std::atomic<uint64_t> next{0};     // next chunk to take
  base::Mutex mu;
  base::CondVar cv;
  uint64_t done GUARDED_BY(mu) = 0;  // chunks finished
};

ThreadPool::ThreadPool(uint32_t threads) {
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  workers_.reserve(threads - 1);
  for (uint32_t i = 1; i < threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
    base::NameThread(workers_.back().native_handle(), "strata-pool" + std::to_string(i));
  }
}

ThreadPool::~ThreadPool() {
  {
    base::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  for (std::thread& t : workers_) t.join();
}

ThreadPool& ThreadPool::Shared() {
  static ThreadPool pool(0);
  return pool;
}

void ThreadPool::RunChunks(Job& job) {
  uint64_t ran = 0;
  for (;;) {
    const uint64_t chunk = job.next.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= job.chunks) break;
    const uint64_t begin = chunk * job.grain;
    (*job.fn)(begin, std::min(job.n, begin + job.grain));
    ++ran;
  }
  if (ran == 0) return;
  base::MutexLock lock(&job.mu);
  job.done += ran;
  if (job.done == job.chunks) job.cv.SignalAll();
}

void ThreadPool::WorkerLoop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      base::MutexLock lock(&mu_);
      while (!stop_ && queue_.empty()) cv_.Wait(&mu_);
      if (stop_ && queue_.empty()) return;
      job = queue_.front();
      const uint32_t joined = job->helpers.fetch_add(1, std::memory_order_relaxed) + 1;
      if (joined >= job->helpers_max || job->next.load(std::memory_order_relaxed) >= job->chunks) {
        queue_.pop_front();  // enough helpers, or nothing left to take
      }
      if (joined > job->helpers_max) continue;
    }
    RunChunks(*job);
  }
}

void ThreadPool::ParallelFor(uint64_t n, uint64_t grain, uint32_t threads, const RangeFn& fn) {
  if (n == 0) return;
  const uint64_t chunks = (n + grain - 1) / grain;
  const uint32_t parallel = threads == 0 ? this->threads() : std::min(threads, this->threads());
  if (chunks == 1 || parallel <= 1) {
    fn(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->grain = grain;
  job->chunks = chunks;
  job->helpers_max = static_cast<uint32_t>(std::min<uint64_t>(parallel - 1, chunks - 1));
  {
    base::MutexLock lock(&mu_);
    queue_.push_back(job);
  }
  if (job->helpers_max == 1) {
    cv_.Signal();
  } else {
    cv_.SignalAll();
  }
  RunChunks(*job);
  base::MutexLock lock(&job->mu);
  while (job->done != job->chunks) job->cv.Wait(&job->mu);
}

}  // namespace strata::kernels
