#include "io/io_threads.h"

#include <algorithm>
#include <thread>

#include "base/assert.h"
#include "base/log.h"
#include "io/buffer_pool.h"
#include "io/io_worker.h"
#include "io/limits.h"
#include "io/topology.h"

namespace strata::io {
namespace {

Status FirstError(std::span<IoRequest> reqs) {
  for (const IoRequest& req : reqs) {
    if (!req.status.ok()) return req.status;
  }
  return Status::Ok();
}

Status ValidateOptions(const IoThreadsOptions& options, const std::vector<int>& allowed) {
  if (options.threads > kIoThreadsMax) {
    return Status::InvalidArgument("IoThreads: threads " + std::to_string(options.threads) +
                                   " exceeds " + std::to_string(kIoThreadsMax));
  }
  if (options.ring_depth == 0 || options.ring_depth > kRingDepthMax) {
    return Status::InvalidArgument("IoThreads: ring_depth " + std::to_string(options.ring_depth) +
                                   " not in [1, " + std::to_string(kRingDepthMax) + "]");
  }
  if (options.cores.size() > kIoThreadsMax) {
    return Status::InvalidArgument("IoThreads: more than " + std::to_string(kIoThreadsMax) +
                                   " cores");
  }
  for (int core : options.cores) {
    if (std::find(allowed.begin(), allowed.end(), core) == allowed.end()) {
      return Status::InvalidArgument("IoThreads: core " + std::to_string(core) +
                                     " is not one this process may run on");
    }
  }
  if (options.buffers_per_thread > 0 && options.buffer_bytes == 0) {
    return Status::InvalidArgument("IoThreads: buffer_bytes is 0 with buffers_per_thread > 0");
  }
  return Status::Ok();
}

}  // namespace

const char* IoBackendName(IoBackend backend) {
  switch (backend) {
    case IoBackend::kAuto:
      return "auto";
    case IoBackend::kUring:
      return "uring";
    case IoBackend::kPsync:
      return "psync";
  }
  return "unknown";
}

Result<std::unique_ptr<IoThreads>> IoThreads::Create(const IoThreadsOptions& options) {
  const std::vector<int> allowed = AllowedCpus();
  STRATA_RETURN_IF_ERROR(ValidateOptions(options, allowed));
  std::unique_ptr<IoThreads> io(new IoThreads());
  if (!options.topology_path.empty()) {
    Result<int> node = NumaNodeOfPath(options.topology_path);
    if (!node.ok()) return node.status().WithContext("IoThreads topology_path");
    io->numa_node_ = *node;
  }
  const uint32_t count = options.threads > 0     ? options.threads
                         : options.cores.empty() ? 1
                                                 : static_cast<uint32_t>(options.cores.size());
  std::vector<int> cores(count, -1);
  if (options.pin_threads) {
    if (!options.cores.empty()) {
      for (uint32_t i = 0; i < count; ++i) cores[i] = options.cores[i % options.cores.size()];
    } else {
      std::vector<uint64_t> irqs;
      if (!options.topology_path.empty()) irqs = DeviceIrqCountsOfPath(options.topology_path);
      std::vector<int> chosen = ChooseIoCores(count, io->numa_node_, allowed, "/sys", irqs);
      if (chosen.size() == count) cores = std::move(chosen);
    }
  }

  std::vector<iovec> regions;
  if (options.buffers_per_thread > 0) {
    for (uint32_t i = 0; i < count; ++i) {
      BufferPoolOptions pool_options;
      pool_options.buffer_bytes = options.buffer_bytes;
      pool_options.buffer_count = options.buffers_per_thread;
      pool_options.numa_node = cores[i] >= 0 ? NodeOfCpu(cores[i]) : io->numa_node_;
      STRATA_ASSIGN_OR_RETURN(auto pool, BufferPool::Create(pool_options));
      regions.push_back(pool->region());
      io->pools_.push_back(std::move(pool));
    }
  }

  FaultEnv* fault = options.env != nullptr ? options.env->AsFaultEnv() : nullptr;
  IoBackend backend = options.backend == IoBackend::kPsync ? IoBackend::kPsync : IoBackend::kUring;
  for (;;) {
    Status started;
    for (uint32_t i = 0; i < count && started.ok(); ++i) {
      IoWorkerOptions worker_options{
          i, cores[i], fault, options.ring_depth, options.request_deadline_ms, regions};
      auto worker = IoWorker::Make(backend, worker_options);
      started = worker->Start();
      if (started.ok()) io->workers_.push_back(std::move(worker));
    }
    if (started.ok()) break;
    io->workers_.clear();  // stops the ones that started
    if (backend == IoBackend::kUring && options.backend == IoBackend::kAuto &&
        started.IsUnavailable()) {
      STRATA_LOG_WARN("io_uring unavailable (%s); falling back to pread/pwrite I/O threads",
                      started.ToString().c_str());
      backend = IoBackend::kPsync;
      continue;
    }
    return started;
  }
  io->backend_ = backend;
  return io;
}

IoThreads::~IoThreads() {
  // No Submit may reach a worker that has stopped: close the door, let the
  // calls already inside (completion callbacks, say) finish, then stop all.
  closing_.store(true, std::memory_order_seq_cst);
  while (submitting_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  workers_.clear();  // each Stop cancels what has not started and joins
}

Status IoThreads::Submit(std::span<IoRequest> reqs,
                         std::function<void(std::span<IoRequest>)> done) {
  submitting_.fetch_add(1, std::memory_order_seq_cst);
  Status status = closing_.load(std::memory_order_seq_cst)
                      ? Status::FailedPrecondition("IoThreads: submit during shutdown")
                      : SubmitOpen(reqs, std::move(done));
  submitting_.fetch_sub(1, std::memory_order_seq_cst);
  return status;
}

Status IoThreads::SubmitOpen(std::span<IoRequest> reqs,
                             std::function<void(std::span<IoRequest>)> done) {
  if (reqs.size() > kIoBatchRequestsMax) {
    return Status::InvalidArgument("IoThreads: batch of " + std::to_string(reqs.size()) +
                                   " requests exceeds " + std::to_string(kIoBatchRequestsMax));
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    Status s = ValidateIoRequest(reqs[i]);
    if (!s.ok()) return s.WithContext("request " + std::to_string(i) + " of the batch");
  }
  if (reqs.empty()) {
    done(reqs);
    return Status::Ok();
  }
  auto* batch = new IoBatch();
  batch->reqs = reqs;
  batch->done = std::move(done);
  batch->remaining.store(reqs.size(), std::memory_order_relaxed);
  for (IoRequest& req : reqs) {
    req.context = batch;
    req.status = Status::Ok();
    req.bytes_done = 0;
  }
  // One contiguous slice per thread, at most; slices spread round robin.
  const auto n = static_cast<uint32_t>(reqs.size());
  const uint32_t slices = std::min<uint32_t>(threads(), n);
  const uint32_t per_slice = (n + slices - 1) / slices;
  const uint32_t first = next_thread_.fetch_add(slices, std::memory_order_relaxed);
  IoSlice planned[kIoThreadsMax];
  uint32_t planned_count = 0;
  for (uint32_t begin = 0; begin < n; begin += per_slice) {
    planned[planned_count++] = IoSlice{batch, begin, std::min(n, begin + per_slice)};
  }
  // After the last Push the batch may already be gone: touch nothing after.
  for (uint32_t i = 0; i < planned_count; ++i) {
    workers_[(first + i) % threads()]->Push(planned[i]);
  }
  return Status::Ok();
}

Status IoThreads::SubmitAndWait(std::span<IoRequest> reqs) {
  auto finished = std::make_shared<std::promise<void>>();
  std::future<void> waited = finished->get_future();
  STRATA_RETURN_IF_ERROR(Submit(reqs, [finished](std::span<IoRequest>) { finished->set_value(); }));
  waited.wait();
  return FirstError(reqs);
}

std::future<Status> IoThreads::SubmitAsync(std::span<IoRequest> reqs) {
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> future = result->get_future();
  Status s =
      Submit(reqs, [result](std::span<IoRequest> done) { result->set_value(FirstError(done)); });
  if (!s.ok()) result->set_value(std::move(s));
  return future;
}

uint8_t* IoThreads::AcquireBuffer() {
  if (pools_.empty()) return nullptr;
  const uint32_t start = next_pool_.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < pools_.size(); ++i) {
    if (uint8_t* buf = pools_[(start + i) % pools_.size()]->Acquire()) return buf;
  }
  return nullptr;
}

void IoThreads::ReleaseBuffer(uint8_t* buf) {
  for (auto& pool : pools_) {
    if (pool->Contains(buf)) {
      pool->Release(buf);
      return;
    }
  }
  STRATA_ASSERT(false, "IoThreads::ReleaseBuffer of a buffer not from AcquireBuffer");
}

size_t IoThreads::buffer_bytes() const {
  return pools_.empty() ? 0 : pools_.front()->buffer_bytes();
}

std::vector<int> IoThreads::cores() const {
  std::vector<int> out;
  for (const auto& worker : workers_) out.push_back(worker->core());
  return out;
}

std::vector<int> IoThreads::thread_ids() const {
  std::vector<int> out;
  for (const auto& worker : workers_) out.push_back(worker->thread_id());
  return out;
}

bool IoThreads::fixed_buffers(uint32_t thread) const {
  return thread < workers_.size() && workers_[thread]->fixed_buffers();
}

uint64_t IoThreads::requests_redone() const {
  uint64_t total = 0;
  for (const auto& worker : workers_) total += worker->requests_redone();
  return total;
}

}  // namespace strata::io
