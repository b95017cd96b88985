// TorchComm (torch_comm.h): the Comm over strata.distributed's collectives.
#include "torch_comm.h"

#include <utility>

namespace strata::python {

namespace py = pybind11;

namespace {

// A memoryview of `bytes` host bytes at `data`, used in place. Writable even
// for a send buffer: torch.frombuffer warns on a read-only one, and the
// collectives only read their inputs.
py::memoryview View(const void* data, size_t bytes) {
  return py::memoryview::from_memory(const_cast<void*>(data), static_cast<py::ssize_t>(bytes),
                                     /*readonly=*/false);
}

py::list ByteCounts(std::span<const int> counts, size_t item_bytes) {
  py::list out;
  for (int c : counts) out.append(static_cast<size_t>(c) * item_bytes);
  return out;
}

}  // namespace

std::unique_ptr<TorchComm> TorchComm::Create(py::object ops) {
  const int rank = ops.attr("rank")().cast<int>();
  const int size = ops.attr("size")().cast<int>();
  return std::unique_ptr<TorchComm>(new TorchComm(std::move(ops), rank, size));
}

TorchComm::TorchComm(py::object ops, int rank, int size)
    : ops_(std::move(ops)), rank_(rank), size_(size) {}

TorchComm::~TorchComm() {
  try {
    py::gil_scoped_acquire locked;
    ops_ = py::object();
  } catch (...) {
    (void)ops_.release();  // no interpreter to take the GIL from: the reference is left
  }
}

Status TorchComm::CheckUsable() const {
  if (broken_.empty()) return Status::Ok();
  return Status::Unavailable(broken_);
}

template <typename Fn>
Status TorchComm::Run(const char* what, Fn&& call) {
  STRATA_RETURN_IF_ERROR(CheckUsable());
  py::gil_scoped_acquire locked;
  try {
    call();
  } catch (py::error_already_set& e) {
    broken_ = std::string("torch.distributed ") + what + " on rank " + std::to_string(rank_) +
              " failed (the process group is unusable from here): " + e.what();
    return Status::Unavailable(broken_);
  }
  return Status::Ok();
}

Status TorchComm::AllToAll(const void* send, void* recv, size_t bytes) {
  const std::vector<int> ones(size_, 1);
  return AllToAllv(send, ones, recv, ones, bytes);
}

Status TorchComm::AllToAllv(const void* send, std::span<const int> send_counts, void* recv,
                            std::span<const int> recv_counts, size_t item_bytes) {
  size_t sent = 0, received = 0;
  for (int c : send_counts) sent += static_cast<size_t>(c) * item_bytes;
  for (int c : recv_counts) received += static_cast<size_t>(c) * item_bytes;
  return Run("all_to_all_single", [&] {
    ops_.attr("all_to_all")(View(send, sent), ByteCounts(send_counts, item_bytes),
                            View(recv, received), ByteCounts(recv_counts, item_bytes));
  });
}

Status TorchComm::AllGather(const void* send, void* recv, size_t bytes) {
  return Run("all_gather", [&] {
    ops_.attr("all_gather")(View(send, bytes), View(recv, bytes * static_cast<size_t>(size_)));
  });
}

Result<std::vector<std::string>> TorchComm::AllGatherBytes(const std::string& mine) {
  return AllGatherBytesPadded(mine);
}

Status TorchComm::Broadcast(void* data, size_t bytes, int root) {
  return Run("broadcast", [&] { ops_.attr("broadcast")(View(data, bytes), root); });
}

Status TorchComm::AllReduceSum(const uint64_t* send, uint64_t* recv, int count) {
  const size_t bytes = static_cast<size_t>(count) * sizeof(uint64_t);
  return Run("all_reduce",
             [&] { ops_.attr("all_reduce_sum")(View(send, bytes), View(recv, bytes)); });
}

}  // namespace strata::python
