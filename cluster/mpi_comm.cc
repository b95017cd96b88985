// MpiComm (mpi_comm.h): MPI calls as Status.
#include "cluster/mpi_comm.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace strata::cluster {
namespace {

// A collective's wait (MpiComm::Wait): MPI_Test and a yield for the first
// kWaitSpin, then MPI_Test every kWaitPoll (the latency a long wait gains).
constexpr auto kWaitSpin = std::chrono::microseconds(500);
constexpr auto kWaitPoll = std::chrono::microseconds(50);

// A Status of `code` (not OK) with `msg`.
Status WithCode(StatusCode code, std::string msg) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return Status::InvalidArgument(std::move(msg));
    case StatusCode::kNotFound:
      return Status::NotFound(std::move(msg));
    case StatusCode::kIOError:
      return Status::IOError(std::move(msg));
    case StatusCode::kCorruption:
      return Status::Corruption(std::move(msg));
    case StatusCode::kResourceExhausted:
      return Status::ResourceExhausted(std::move(msg));
    case StatusCode::kFailedPrecondition:
      return Status::FailedPrecondition(std::move(msg));
    case StatusCode::kUnavailable:
      return Status::Unavailable(std::move(msg));
    case StatusCode::kOk:
    case StatusCode::kInternal:
      break;
  }
  return Status::Internal(std::move(msg));
}

}  // namespace

Status MpiError(int rc, std::string_view call, int rank) {
  if (rc == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  std::string msg = "rank " + std::to_string(rank) + ": " + std::string(call) + " failed: ";
  msg += len > 0 ? std::string(text, len) : "MPI error " + std::to_string(rc);
  return Status::Unavailable(std::move(msg));
}

Result<std::unique_ptr<MpiComm>> MpiComm::Dup(MPI_Comm comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return Status::FailedPrecondition("Cluster::Open: MPI is not initialized");
  MPI_Comm dup = MPI_COMM_NULL;
  STRATA_RETURN_IF_ERROR(MpiError(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup", -1));
  int rank = 0;
  int size = 0;
  Status s =
      MpiError(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", -1);
  if (s.ok()) s = MpiError(MPI_Comm_rank(dup, &rank), "MPI_Comm_rank", -1);
  if (s.ok()) s = MpiError(MPI_Comm_size(dup, &size), "MPI_Comm_size", rank);
  if (!s.ok()) {
    MPI_Comm_free(&dup);
    return s;
  }
  return std::unique_ptr<MpiComm>(new MpiComm(dup, rank, size));
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

void MpiComm::SetTimeout(uint64_t timeout_ms) { timeout_ms_ = timeout_ms; }

Status MpiComm::CheckUsable() const {
  if (!broken_.empty()) return Status::Unavailable(broken_);
  return Status::Ok();
}

Status MpiComm::Wait(MPI_Request* req, std::string_view call) {
  if (timeout_ms_ == 0) return MpiError(MPI_Wait(req, MPI_STATUS_IGNORE), call, rank_);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms_);
  for (;;) {
    int done = 0;
    STRATA_RETURN_IF_ERROR(MpiError(MPI_Test(req, &done, MPI_STATUS_IGNORE), call, rank_));
    if (done) return Status::Ok();
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    // Ranks may outnumber cores: poll with a yield at first, then, once the
    // wait is long (another rank computes or serves its shard), in short
    // sleeps, so that a waiting rank does not take the core a working one
    // needs.
    if (now - start < kWaitSpin) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(kWaitPoll);
    }
  }
  // The request stays pending (MPI cannot cancel a collective): the
  // communicator is unusable from here on, and says so on every later call.
  broken_ = "rank " + std::to_string(rank_) + ": " + std::string(call) +
            " did not complete within " + std::to_string(timeout_ms_) +
            " ms (ClusterOptions::collective_timeout_ms): a rank died, hangs, or did not make the "
            "same collective call; the cluster is unusable";
  return Status::Unavailable(broken_);
}

Status MpiComm::AgreeOn(const Status& local) {
  if (size_ == 1) {  // nobody to agree with: the same message, no MPI call
    STRATA_RETURN_IF_ERROR(CheckUsable());
    return local.ok() ? Status::Ok() : WithCode(local.code(), "rank 0: " + local.message());
  }
  const int32_t mine = static_cast<int32_t>(local.code());
  std::vector<int32_t> codes(size_);
  STRATA_RETURN_IF_ERROR(AllGather(&mine, codes.data(), 1, MPI_INT32_T));
  return AgreeOnKnown(codes, local);
}

Status MpiComm::AgreeOnKnown(std::span<const int32_t> codes, const Status& local) {
  const auto failed = std::find_if(codes.begin(), codes.end(), [](int32_t c) { return c != 0; });
  if (failed == codes.end()) return Status::Ok();
  // Every rank knows someone failed, so every rank gathers the messages.
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> messages,
                          AllGatherBytes(local.ok() ? std::string() : local.message()));
  const int at = static_cast<int>(failed - codes.begin());
  return WithCode(static_cast<StatusCode>(*failed),
                  "rank " + std::to_string(at) + ": " + messages[at]);
}

Status MpiComm::AllToAll(const void* send, void* recv, int per_rank, MPI_Datatype type) {
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Ialltoall(send, per_rank, type, recv, per_rank, type, comm_, &req),
               "MPI_Ialltoall", rank_));
  return Wait(&req, "MPI_Ialltoall");
}

Status MpiComm::AllToAllv(const void* send, std::span<const int> send_counts, void* recv,
                          std::span<const int> recv_counts, MPI_Datatype type) {
  send_displs_.assign(size_, 0);
  recv_displs_.assign(size_, 0);
  for (int r = 1; r < size_; ++r) {
    send_displs_[r] = send_displs_[r - 1] + send_counts[r - 1];
    recv_displs_[r] = recv_displs_[r - 1] + recv_counts[r - 1];
  }
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Ialltoallv(send, send_counts.data(), send_displs_.data(), type, recv,
                              recv_counts.data(), recv_displs_.data(), type, comm_, &req),
               "MPI_Ialltoallv", rank_));
  return Wait(&req, "MPI_Ialltoallv");
}

Status MpiComm::AllGather(const void* send, void* recv, int per_rank, MPI_Datatype type) {
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Iallgather(send, per_rank, type, recv, per_rank, type, comm_, &req),
               "MPI_Iallgather", rank_));
  return Wait(&req, "MPI_Iallgather");
}

Result<std::vector<std::string>> MpiComm::AllGatherBytes(const std::string& mine) {
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(size_);
  STRATA_RETURN_IF_ERROR(AllGather(&len, lens.data(), 1, MPI_INT));
  std::vector<int> displs(size_, 0);
  for (int r = 1; r < size_; ++r) displs[r] = displs[r - 1] + lens[r - 1];
  std::string all(static_cast<size_t>(displs[size_ - 1]) + lens[size_ - 1], '\0');
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Iallgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                               MPI_CHAR, comm_, &req),
               "MPI_Iallgatherv", rank_));
  STRATA_RETURN_IF_ERROR(Wait(&req, "MPI_Iallgatherv"));
  std::vector<std::string> out(size_);
  for (int r = 0; r < size_; ++r) out[r] = all.substr(displs[r], lens[r]);
  return out;
}

Status MpiComm::Broadcast(void* data, int count, MPI_Datatype type, int root) {
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Ibcast(data, count, type, root, comm_, &req), "MPI_Ibcast", rank_));
  return Wait(&req, "MPI_Ibcast");
}

Status MpiComm::AllReduce(const void* send, void* recv, int count, MPI_Datatype type) {
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_RETURN_IF_ERROR(MpiError(MPI_Iallreduce(send, recv, count, type, MPI_SUM, comm_, &req),
                                  "MPI_Iallreduce", rank_));
  return Wait(&req, "MPI_Iallreduce");
}

Status MpiComm::AllReduceSum(const uint64_t* send, uint64_t* recv, int count) {
  return AllReduce(send, recv, count, MPI_UINT64_T);
}

Status MpiComm::AllReduceSumInPlace(float* data, int count) {
  return AllReduce(MPI_IN_PLACE, data, count, MPI_FLOAT);
}

}  // namespace strata::cluster
