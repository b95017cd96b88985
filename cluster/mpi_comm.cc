// MpiComm (mpi_comm.h): MPI calls as Status.
#include "cluster/mpi_comm.h"

#include <chrono>
#include <climits>
#include <thread>

namespace strata::cluster {
namespace {

// A collective's wait (MpiComm::Wait): MPI_Test and a yield for the first
// kWaitSpin, then MPI_Test every kWaitPoll (the latency a long wait gains).
constexpr auto kWaitSpin = std::chrono::microseconds(3000);
constexpr auto kWaitPoll = std::chrono::microseconds(50);

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
  if (finalized) return;
  for (auto& [bytes, type] : item_types_) MPI_Type_free(&type);
  MPI_Comm_free(&comm_);
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

Status MpiComm::ByteCount(size_t bytes, std::string_view call, int* count) const {
  if (bytes > static_cast<size_t>(INT_MAX)) {
    return Status::ResourceExhausted("rank " + std::to_string(rank_) + ": " + std::string(call) +
                                     ": " + std::to_string(bytes) + " bytes, MPI counts at most " +
                                     std::to_string(INT_MAX));
  }
  *count = static_cast<int>(bytes);
  return Status::Ok();
}

Result<MPI_Datatype> MpiComm::ItemType(size_t item_bytes) {
  if (item_bytes == 1) return MPI_BYTE;
  for (const auto& [bytes, type] : item_types_) {
    if (bytes == item_bytes) return type;
  }
  int count = 0;
  STRATA_RETURN_IF_ERROR(ByteCount(item_bytes, "MPI_Type_contiguous", &count));
  MPI_Datatype type = MPI_DATATYPE_NULL;
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Type_contiguous(count, MPI_BYTE, &type), "MPI_Type_contiguous", rank_));
  Status s = MpiError(MPI_Type_commit(&type), "MPI_Type_commit", rank_);
  if (!s.ok()) {
    MPI_Type_free(&type);
    return s;
  }
  item_types_.emplace_back(item_bytes, type);
  return type;
}

Status MpiComm::Barrier() {
  STRATA_RETURN_IF_ERROR(CheckUsable());
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(MpiError(MPI_Ibarrier(comm_, &req), "MPI_Ibarrier", rank_));
  return Wait(&req, "MPI_Ibarrier");
}

Status MpiComm::AllToAll(const void* send, void* recv, size_t bytes) {
  int count = 0;
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_RETURN_IF_ERROR(ByteCount(bytes, "MPI_Ialltoall", &count));
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Ialltoall(send, count, MPI_BYTE, recv, count, MPI_BYTE, comm_, &req),
               "MPI_Ialltoall", rank_));
  return Wait(&req, "MPI_Ialltoall");
}

Status MpiComm::AllToAllv(const void* send, std::span<const int> send_counts, void* recv,
                          std::span<const int> recv_counts, size_t item_bytes) {
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_ASSIGN_OR_RETURN(MPI_Datatype type, ItemType(item_bytes));
  send_displs_.assign(size_, 0);
  recv_displs_.assign(size_, 0);
  for (int r = 1; r < size_; ++r) {
    send_displs_[r] = send_displs_[r - 1] + send_counts[r - 1];
    recv_displs_[r] = recv_displs_[r - 1] + recv_counts[r - 1];
  }
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Ialltoallv(send, send_counts.data(), send_displs_.data(), type, recv,
                              recv_counts.data(), recv_displs_.data(), type, comm_, &req),
               "MPI_Ialltoallv", rank_));
  return Wait(&req, "MPI_Ialltoallv");
}

Status MpiComm::AllGather(const void* send, void* recv, size_t bytes) {
  int count = 0;
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_RETURN_IF_ERROR(ByteCount(bytes, "MPI_Iallgather", &count));
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Iallgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, comm_, &req),
               "MPI_Iallgather", rank_));
  return Wait(&req, "MPI_Iallgather");
}

Result<std::vector<std::string>> MpiComm::AllGatherBytes(const std::string& mine) {
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(size_);
  STRATA_RETURN_IF_ERROR(AllGather(&len, lens.data(), sizeof(len)));
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

Status MpiComm::Broadcast(void* data, size_t bytes, int root) {
  int count = 0;
  STRATA_RETURN_IF_ERROR(CheckUsable());
  STRATA_RETURN_IF_ERROR(ByteCount(bytes, "MPI_Ibcast", &count));
  MPI_Request req;
  STRATA_RETURN_IF_ERROR(
      MpiError(MPI_Ibcast(data, count, MPI_BYTE, root, comm_, &req), "MPI_Ibcast", rank_));
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
