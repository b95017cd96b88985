// NcclComm (nccl_comm.h): NCCL calls as Status, each collective completed on
// the stream within the timeout.
#include "cluster/nccl_comm.h"

#include <algorithm>
#include <thread>

namespace strata::cluster {
namespace {

// A collective's wait: polls with a yield for the first kWaitSpin, then every
// kWaitPoll (as MpiComm::Wait).
constexpr auto kWaitSpin = std::chrono::microseconds(500);
constexpr auto kWaitPoll = std::chrono::microseconds(50);
// The control plane's staging buffer at first (grown to the largest call).
constexpr size_t kScratchBytesMin = 4096;

void Pause(std::chrono::steady_clock::time_point start) {
  if (std::chrono::steady_clock::now() - start < kWaitSpin) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(kWaitPoll);
  }
}

ncclConfig_t NonBlockingConfig() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

// The caller's current device, as the communicator's.
Result<int> CurrentDevice() {
  int device = -1;
  const cudaError_t rc = cudaGetDevice(&device);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::FailedPrecondition(std::string("the NCCL form needs a GPU: cudaGetDevice: ") +
                                      cudaGetErrorString(rc));
  }
  return device;
}

// A new communicator's set-up, settled: ncclInProgress until it is done.
Status SettleNew(ncclComm_t comm, ncclResult_t rc, std::string_view call, uint64_t timeout_ms) {
  const auto start = std::chrono::steady_clock::now();
  while (rc == ncclInProgress) {
    if (timeout_ms != 0 &&
        std::chrono::steady_clock::now() - start > std::chrono::milliseconds(timeout_ms)) {
      (void)ncclCommAbort(comm);
      return Status::Unavailable(std::string(call) + " did not complete within " +
                                 std::to_string(timeout_ms) +
                                 " ms (ClusterOptions::collective_timeout_ms): a rank died, hangs, "
                                 "or did not open the cluster");
    }
    Pause(start);
    if (ncclCommGetAsyncError(comm, &rc) != ncclSuccess) rc = ncclInternalError;
  }
  if (rc == ncclSuccess) return Status::Ok();
  if (comm != nullptr) (void)ncclCommAbort(comm);
  return Status::Unavailable(std::string(call) + " failed: " + ncclGetErrorString(rc));
}

}  // namespace

Result<std::unique_ptr<NcclComm>> NcclComm::Split(ncclComm_t parent, uint64_t timeout_ms) {
  if (parent == nullptr) {
    return Status::InvalidArgument("Cluster::Open: a null ncclComm_t");
  }
  STRATA_ASSIGN_OR_RETURN(int device, CurrentDevice());
  int rank = 0;
  int size = 0;
  ncclResult_t rc = ncclCommUserRank(parent, &rank);
  if (rc == ncclSuccess) rc = ncclCommCount(parent, &size);
  if (rc != ncclSuccess) {
    return Status::InvalidArgument(std::string("Cluster::Open: the ncclComm_t's rank and size: ") +
                                   ncclGetErrorString(rc));
  }
  ncclConfig_t config = NonBlockingConfig();
  ncclComm_t comm = nullptr;
  rc = ncclCommSplit(parent, 0, rank, &comm, &config);
  STRATA_RETURN_IF_ERROR(
      SettleNew(comm, rc, "rank " + std::to_string(rank) + ": ncclCommSplit", timeout_ms));
  std::unique_ptr<NcclComm> out(new NcclComm(comm, rank, size, device));
  out->SetTimeout(timeout_ms);
  STRATA_RETURN_IF_ERROR(out->Init());
  return out;
}

Result<std::unique_ptr<NcclComm>> NcclComm::Create(Comm* host, uint64_t timeout_ms) {
  Result<int> device = CurrentDevice();
  ncclUniqueId id{};
  Status local = device.status();
  if (local.ok() && host->rank() == 0) {
    const ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess) {
      local = Status::Unavailable(std::string("ncclGetUniqueId: ") + ncclGetErrorString(rc));
    }
  }
  STRATA_RETURN_IF_ERROR(host->AgreeOn(local));
  STRATA_RETURN_IF_ERROR(host->Broadcast(&id, sizeof(id), 0));
  ncclConfig_t config = NonBlockingConfig();
  ncclComm_t comm = nullptr;
  const std::string call = "rank " + std::to_string(host->rank()) + ": ncclCommInitRankConfig";
  local = SettleNew(comm, ncclCommInitRankConfig(&comm, host->size(), id, host->rank(), &config),
                    call, timeout_ms);
  std::unique_ptr<NcclComm> out;
  if (local.ok()) {
    out.reset(new NcclComm(comm, host->rank(), host->size(), *device));
    out->SetTimeout(timeout_ms);
    local = out->Init();
  }
  STRATA_RETURN_IF_ERROR(host->AgreeOn(local));
  return out;
}

Status NcclComm::Init() {
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking),
                                    "cudaStreamCreate"));
  stream_ = own_stream_;
  STRATA_RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate"));
  STRATA_RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&last_, cudaEventDisableTiming), "cudaEventCreate"));
  return Reserve(kScratchBytesMin);
}

NcclComm::~NcclComm() {
  (void)cudaSetDevice(device_);
  if (broken_.empty()) {
    // Finalize flushes what the communicator has in flight; bounded like a
    // collective, then aborted.
    const Deadline deadline = DeadlineFromNow();
    ncclResult_t rc = ncclCommFinalize(comm_);
    const auto start = std::chrono::steady_clock::now();
    while (rc == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      Pause(start);
      if (ncclCommGetAsyncError(comm_, &rc) != ncclSuccess) rc = ncclInternalError;
    }
    if (rc == ncclSuccess) {
      (void)ncclCommDestroy(comm_);
    } else {
      (void)ncclCommAbort(comm_);
    }
  }
  if (scratch_ != nullptr) (void)cudaFree(scratch_);
  if (done_ != nullptr) (void)cudaEventDestroy(done_);
  if (last_ != nullptr) (void)cudaEventDestroy(last_);
  if (own_stream_ != nullptr) (void)cudaStreamDestroy(own_stream_);
}

void NcclComm::UseStream(void* stream) {
  stream_ = static_cast<cudaStream_t>(stream);
  if (last_recorded_ && cudaStreamWaitEvent(stream_, last_, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaEventSynchronize(last_);  // the order kept the slow way
  }
}

void NcclComm::UseOwnStream() {
  last_recorded_ = cudaEventRecord(last_, stream_) == cudaSuccess;
  if (!last_recorded_) {
    (void)cudaGetLastError();
    (void)cudaStreamSynchronize(stream_);  // nothing left to wait for
  }
  stream_ = own_stream_;
}

Status NcclComm::CheckUsable() const {
  if (!broken_.empty()) return Status::Unavailable(broken_);
  return Status::Ok();
}

Status NcclComm::Break(std::string why) {
  broken_ = std::move(why);
  (void)ncclCommAbort(comm_);
  return Status::Unavailable(broken_);
}

Status NcclComm::TimedOut(std::string_view call) {
  return Break("rank " + std::to_string(rank_) + ": " + std::string(call) +
               " did not complete within " + std::to_string(timeout_ms_) +
               " ms (ClusterOptions::collective_timeout_ms): a rank died, hangs, or did not make "
               "the same collective call; the cluster is unusable");
}

Status NcclComm::NcclStatus(ncclResult_t rc, std::string_view call) {
  if (rc == ncclSuccess || rc == ncclInProgress) return Status::Ok();
  std::string why = "rank " + std::to_string(rank_) + ": " + std::string(call) +
                    " failed: " + ncclGetErrorString(rc);
  const char* last = ncclGetLastError(comm_);
  if (last != nullptr && *last != '\0') why += std::string(" (") + last + ")";
  return Break(why + "; the cluster is unusable");
}

Status NcclComm::CudaStatus(cudaError_t rc, std::string_view call) {
  if (rc == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();
  return Status::Internal("rank " + std::to_string(rank_) + ": " + std::string(call) + ": " +
                          cudaGetErrorName(rc) + ": " + cudaGetErrorString(rc));
}

NcclComm::Deadline NcclComm::DeadlineFromNow() const {
  if (timeout_ms_ == 0) return Deadline::max();
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
}

Status NcclComm::Settle(std::string_view call, Deadline deadline) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    ncclResult_t rc = ncclSuccess;
    const ncclResult_t got = ncclCommGetAsyncError(comm_, &rc);
    if (got != ncclSuccess) rc = got;
    if (rc == ncclSuccess) return Status::Ok();
    if (rc != ncclInProgress) return NcclStatus(rc, call);
    if (std::chrono::steady_clock::now() >= deadline) break;
    Pause(start);
  }
  return TimedOut(call);
}

template <typename Fn>
Status NcclComm::Run(std::string_view call, Fn&& enqueue) {
  const Deadline deadline = DeadlineFromNow();
  STRATA_RETURN_IF_ERROR(NcclStatus(ncclGroupStart(), "ncclGroupStart"));
  const ncclResult_t queued = enqueue();
  const ncclResult_t ended = ncclGroupEnd();
  STRATA_RETURN_IF_ERROR(NcclStatus(queued, call));
  STRATA_RETURN_IF_ERROR(NcclStatus(ended, call));
  STRATA_RETURN_IF_ERROR(Settle(call, deadline));
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaEventRecord(done_, stream_), "cudaEventRecord"));
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t rc = cudaEventQuery(done_);
    if (rc == cudaSuccess) return Status::Ok();
    if (rc != cudaErrorNotReady) return CudaStatus(rc, std::string(call) + " (on the stream)");
    // An asynchronous error (a peer gone) ends the wait early.
    STRATA_RETURN_IF_ERROR(Settle(call, deadline));
    if (std::chrono::steady_clock::now() >= deadline) break;
    Pause(start);
  }
  return TimedOut(call);
}

Status NcclComm::Reserve(size_t bytes) {
  if (bytes <= scratch_bytes_) return Status::Ok();
  const size_t grown = std::max(bytes, 2 * scratch_bytes_);
  if (scratch_ != nullptr) {
    STRATA_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"));
    (void)cudaFree(scratch_);
    scratch_ = nullptr;
    scratch_bytes_ = 0;
  }
  void* p = nullptr;
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&p, grown), "cudaMalloc (NCCL staging)"));
  scratch_ = static_cast<char*>(p);
  scratch_bytes_ = grown;
  return Status::Ok();
}

Status NcclComm::Begin(size_t scratch_bytes) {
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  return Reserve(scratch_bytes);
}

Status NcclComm::Stage(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  return CudaStatus(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_),
                    "cudaMemcpyAsync (staging)");
}

Status NcclComm::Unstage(void* host, const void* device, size_t bytes) {
  if (bytes == 0) return Status::Ok();
  // The collective before has completed (Run), so this copy cannot hang.
  STRATA_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync"));
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

Status NcclComm::AllToAll(const void* send, void* recv, size_t bytes) {
  const size_t total = bytes * size_;
  STRATA_RETURN_IF_ERROR(Begin(2 * total));
  char* out = scratch_;
  char* in = scratch_ + total;
  STRATA_RETURN_IF_ERROR(Stage(out, send, total));
  STRATA_RETURN_IF_ERROR(Run("ncclSend/ncclRecv (all-to-all)", [&] {
    ncclResult_t rc = ncclSuccess;
    for (int r = 0; r < size_ && rc == ncclSuccess; ++r) {
      rc = ncclSend(out + r * bytes, bytes, ncclUint8, r, comm_, stream_);
      if (rc == ncclSuccess) rc = ncclRecv(in + r * bytes, bytes, ncclUint8, r, comm_, stream_);
    }
    return rc;
  }));
  return Unstage(recv, in, total);
}

Status NcclComm::AllToAllv(const void* send, std::span<const int> send_counts, void* recv,
                           std::span<const int> recv_counts, size_t item_bytes) {
  STRATA_RETURN_IF_ERROR(Begin(0));
  const char* out = static_cast<const char*>(send);
  char* in = static_cast<char*>(recv);
  return Run("ncclSend/ncclRecv (keys, rows)", [&] {
    ncclResult_t rc = ncclSuccess;
    size_t send_at = 0;
    size_t recv_at = 0;
    for (int r = 0; r < size_ && rc == ncclSuccess; ++r) {
      const size_t send_bytes = static_cast<size_t>(send_counts[r]) * item_bytes;
      const size_t recv_bytes = static_cast<size_t>(recv_counts[r]) * item_bytes;
      if (send_bytes > 0) rc = ncclSend(out + send_at, send_bytes, ncclUint8, r, comm_, stream_);
      if (rc == ncclSuccess && recv_bytes > 0) {
        rc = ncclRecv(in + recv_at, recv_bytes, ncclUint8, r, comm_, stream_);
      }
      send_at += send_bytes;
      recv_at += recv_bytes;
    }
    return rc;
  });
}

Status NcclComm::AllGather(const void* send, void* recv, size_t bytes) {
  const size_t total = bytes * size_;
  STRATA_RETURN_IF_ERROR(Begin(bytes + total));
  char* out = scratch_;
  char* in = scratch_ + bytes;
  STRATA_RETURN_IF_ERROR(Stage(out, send, bytes));
  STRATA_RETURN_IF_ERROR(Run(
      "ncclAllGather", [&] { return ncclAllGather(out, in, bytes, ncclUint8, comm_, stream_); }));
  return Unstage(recv, in, total);
}

Result<std::vector<std::string>> NcclComm::AllGatherBytes(const std::string& mine) {
  return AllGatherBytesPadded(mine);  // NCCL has no all-gather of varying sizes
}

Status NcclComm::Broadcast(void* data, size_t bytes, int root) {
  STRATA_RETURN_IF_ERROR(Begin(bytes));
  STRATA_RETURN_IF_ERROR(Stage(scratch_, data, bytes));
  STRATA_RETURN_IF_ERROR(Run("ncclBroadcast", [&] {
    return ncclBroadcast(scratch_, scratch_, bytes, ncclUint8, root, comm_, stream_);
  }));
  return Unstage(data, scratch_, bytes);
}

Status NcclComm::AllReduceSum(const uint64_t* send, uint64_t* recv, int count) {
  const size_t bytes = sizeof(uint64_t) * static_cast<size_t>(count);
  STRATA_RETURN_IF_ERROR(Begin(bytes));
  STRATA_RETURN_IF_ERROR(Stage(scratch_, send, bytes));
  STRATA_RETURN_IF_ERROR(Run("ncclAllReduce", [&] {
    return ncclAllReduce(scratch_, scratch_, count, ncclUint64, ncclSum, comm_, stream_);
  }));
  return Unstage(recv, scratch_, bytes);
}

}  // namespace strata::cluster
