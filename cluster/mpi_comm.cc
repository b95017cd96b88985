// MpiComm (mpi_comm.h): MPI calls as Status.
#include "cluster/mpi_comm.h"

#include <algorithm>

namespace strata::cluster {
namespace {

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

Status MpiComm::AgreeOn(const Status& local) {
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
  return MpiError(MPI_Alltoall(send, per_rank, type, recv, per_rank, type, comm_), "MPI_Alltoall",
                  rank_);
}

Status MpiComm::AllToAllv(const void* send, std::span<const int> send_counts, void* recv,
                          std::span<const int> recv_counts, MPI_Datatype type) {
  send_displs_.assign(size_, 0);
  recv_displs_.assign(size_, 0);
  for (int r = 1; r < size_; ++r) {
    send_displs_[r] = send_displs_[r - 1] + send_counts[r - 1];
    recv_displs_[r] = recv_displs_[r - 1] + recv_counts[r - 1];
  }
  return MpiError(MPI_Alltoallv(send, send_counts.data(), send_displs_.data(), type, recv,
                                recv_counts.data(), recv_displs_.data(), type, comm_),
                  "MPI_Alltoallv", rank_);
}

Status MpiComm::AllGather(const void* send, void* recv, int per_rank, MPI_Datatype type) {
  return MpiError(MPI_Allgather(send, per_rank, type, recv, per_rank, type, comm_), "MPI_Allgather",
                  rank_);
}

Result<std::vector<std::string>> MpiComm::AllGatherBytes(const std::string& mine) {
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(size_);
  STRATA_RETURN_IF_ERROR(AllGather(&len, lens.data(), 1, MPI_INT));
  std::vector<int> displs(size_, 0);
  for (int r = 1; r < size_; ++r) displs[r] = displs[r - 1] + lens[r - 1];
  std::string all(static_cast<size_t>(displs[size_ - 1]) + lens[size_ - 1], '\0');
  STRATA_RETURN_IF_ERROR(MpiError(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(),
                                                 lens.data(), displs.data(), MPI_CHAR, comm_),
                                  "MPI_Allgatherv", rank_));
  std::vector<std::string> out(size_);
  for (int r = 0; r < size_; ++r) out[r] = all.substr(displs[r], lens[r]);
  return out;
}

Status MpiComm::Broadcast(void* data, int count, MPI_Datatype type, int root) {
  return MpiError(MPI_Bcast(data, count, type, root, comm_), "MPI_Bcast", rank_);
}

Status MpiComm::AllReduceSum(const uint64_t* send, uint64_t* recv, int count) {
  return MpiError(MPI_Allreduce(send, recv, count, MPI_UINT64_T, MPI_SUM, comm_), "MPI_Allreduce",
                  rank_);
}

}  // namespace strata::cluster
