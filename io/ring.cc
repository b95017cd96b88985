#include "io/ring.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace strata::io {
namespace {
// user_data of the wakeup poll; requests are pointers, never this value.
constexpr uint64_t kWakeupTag = 1;
}  // namespace

Result<std::unique_ptr<Ring>> Ring::Create(const RingOptions& options) {
  if (options.depth == 0 || options.depth > kRingDepthMax) {
    return Status::InvalidArgument("ring depth " + std::to_string(options.depth) + " not in [1, " +
                                   std::to_string(kRingDepthMax) + "]");
  }
  if (options.pending_max == 0 || options.pending_max > kRingPendingMax) {
    return Status::InvalidArgument("ring pending_max " + std::to_string(options.pending_max) +
                                   " not in [1, " + std::to_string(kRingPendingMax) + "]");
  }
  std::unique_ptr<Ring> ring(new Ring(options));
  io_uring_params params;
  std::memset(&params, 0, sizeof(params));
  params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN;
  int rc = io_uring_queue_init_params(options.depth, &ring->ring_, &params);
  if (rc == -EINVAL) {  // kernel older than 6.0: no single-issuer flags
    std::memset(&params, 0, sizeof(params));
    rc = io_uring_queue_init_params(options.depth, &ring->ring_, &params);
  }
  if (rc < 0) {
    return Status::Unavailable(std::string("io_uring_queue_init: ") + std::strerror(-rc));
  }
  ring->ring_ready_ = true;
  ring->in_flight_max_ = params.cq_entries;
  return ring;
}

Ring::~Ring() {
  if (!ring_ready_) return;
  DrainForShutdown();
  io_uring_queue_exit(&ring_);
}

void Ring::DrainForShutdown() {
  // Requests never submitted are cancelled; those in the kernel finish.
  for (IoRequest* req : pending_) {
    req->status = Status::Unavailable(std::string("ring closed before the ") + IoOpName(req->op) +
                                      " of file " + req->file->path() + " was issued");
  }
  pending_.clear();
  if (wakeup_in_kernel_) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe != nullptr) {
      io_uring_prep_poll_remove(sqe, kWakeupTag);
      io_uring_sqe_set_data64(sqe, 0);
    }
  }
  while (in_flight_ > 0 || wakeup_in_kernel_) {
    io_uring_submit(&ring_);
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring_, &cqe) < 0) break;
    uint64_t data = io_uring_cqe_get_data64(cqe);
    if (data == kWakeupTag) {
      wakeup_in_kernel_ = false;
    } else if (data != 0) {
      --in_flight_;
    }
    io_uring_cqe_seen(&ring_, cqe);
  }
}

Status Ring::RegisterBuffers(std::span<const iovec> regions) {
  if (!regions_.empty()) {
    io_uring_unregister_buffers(&ring_);
    regions_.clear();
  }
  if (regions.empty()) return Status::Ok();
  int rc = io_uring_register_buffers(&ring_, regions.data(), static_cast<unsigned>(regions.size()));
  if (rc < 0) return Status::FromErrno(-rc, "io_uring_register_buffers");
  regions_.assign(regions.begin(), regions.end());
  return Status::Ok();
}

Status Ring::RegisterFiles(std::span<const int> fds) {
  UnregisterFiles();
  if (fds.empty()) return Status::Ok();
  int rc = io_uring_register_files(&ring_, fds.data(), static_cast<unsigned>(fds.size()));
  if (rc < 0) return Status::FromErrno(-rc, "io_uring_register_files");
  for (size_t slot = 0; slot < fds.size(); ++slot) {
    int fd = fds[slot];
    if (fd < 0) continue;
    if (static_cast<size_t>(fd) >= fd_slot_.size()) fd_slot_.resize(fd + 1, -1);
    fd_slot_[fd] = static_cast<int>(slot);
  }
  return Status::Ok();
}

void Ring::UnregisterFiles() {
  if (fd_slot_.empty()) return;
  io_uring_unregister_files(&ring_);
  fd_slot_.clear();
}

Status Ring::Enqueue(IoRequest* req) {
  if (pending_.size() >= options_.pending_max) {
    return Status::ResourceExhausted("ring pending list full (" +
                                     std::to_string(options_.pending_max) + " requests)");
  }
  req->status = Status::Ok();
  req->bytes_done = 0;
  pending_.push_back(req);
  return Status::Ok();
}

Status Ring::ArmWakeup(int event_fd) {
  wakeup_fd_ = event_fd;
  wakeup_armed_ = true;
  return Status::Ok();
}

int Ring::FixedBufferIndex(const void* buf, size_t len) const {
  auto addr = reinterpret_cast<uintptr_t>(buf);
  for (size_t i = 0; i < regions_.size(); ++i) {
    auto base = reinterpret_cast<uintptr_t>(regions_[i].iov_base);
    if (addr >= base && addr + len <= base + regions_[i].iov_len) return static_cast<int>(i);
  }
  return -1;
}

void Ring::PrepareOne(io_uring_sqe* sqe, IoRequest* req) {
  int fd = req->file->fd();
  bool fixed_file = static_cast<size_t>(fd) < fd_slot_.size() && fd_slot_[fd] >= 0;
  if (fixed_file) fd = fd_slot_[fd];
  auto* buf = static_cast<uint8_t*>(req->buf) + req->bytes_done;
  const uint32_t len = req->len - req->bytes_done;
  const uint64_t offset = req->offset + req->bytes_done;
  switch (req->op) {
    case IoRequest::Op::kRead:
    case IoRequest::Op::kWrite: {
      const bool read = req->op == IoRequest::Op::kRead;
      int index = FixedBufferIndex(buf, len);
      if (index >= 0) {
        if (read) {
          io_uring_prep_read_fixed(sqe, fd, buf, len, offset, index);
        } else {
          io_uring_prep_write_fixed(sqe, fd, buf, len, offset, index);
        }
      } else if (read) {
        io_uring_prep_read(sqe, fd, buf, len, offset);
      } else {
        io_uring_prep_write(sqe, fd, buf, len, offset);
      }
      break;
    }
    case IoRequest::Op::kFsync:
      io_uring_prep_fsync(sqe, fd, 0);
      break;
    case IoRequest::Op::kFdatasync:
      io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
      break;
  }
  if (fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data(sqe, req);
}

uint32_t Ring::Prepare() {
  uint32_t prepared = 0;
  if (wakeup_armed_ && !wakeup_in_kernel_) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) return 0;
    io_uring_prep_poll_add(sqe, wakeup_fd_, POLLIN);
    io_uring_sqe_set_data64(sqe, kWakeupTag);
    wakeup_in_kernel_ = true;
    ++prepared;
  }
  // Keep completions within the completion queue: one per request in flight.
  while (!pending_.empty() && in_flight_ + 1 < in_flight_max_) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) break;
    PrepareOne(sqe, pending_.front());
    pending_.pop_front();
    ++in_flight_;
    ++prepared;
  }
  return prepared;
}

void Ring::Finish(IoRequest* req, int res, CompletionSink* sink, uint32_t* finished) {
  const bool sync = IsSync(req->op);
  if (res < 0) {
    req->status = IoRequestError(*req, -res, "io_uring");
  } else if (!sync) {
    req->bytes_done += static_cast<uint32_t>(res);
    const bool read = req->op == IoRequest::Op::kRead;
    if (req->bytes_done < req->len) {
      if (res == 0 && !read) {
        req->status =
            Status::IOError("io_uring write of file " + req->file->path() + " at offset " +
                            std::to_string(req->offset + req->bytes_done) + " wrote nothing");
      } else if (res > 0 && !(read && req->file->direct() && (req->bytes_done % kIoAlignBytes))) {
        pending_.push_front(req);  // partial transfer: issue the rest next
        return;
      }
      // A read of 0 bytes, or an unaligned O_DIRECT read: end of file.
    }
  }
  sink->OnComplete(req);
  ++*finished;
}

Result<uint32_t> Ring::Poll(uint32_t wait_min, CompletionSink* sink) {
  uint32_t finished = 0;
  for (;;) {
    Prepare();
    const bool nothing_to_wait_for = in_flight_ == 0 && !wakeup_in_kernel_;
    unsigned wait = (finished >= wait_min || nothing_to_wait_for) ? 0 : 1;
    int rc = io_uring_submit_and_wait(&ring_, wait);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      return Status::FromErrno(-rc, "io_uring_submit_and_wait");
    }
    unsigned head;
    io_uring_cqe* cqe;
    unsigned seen = 0;
    bool woke = false;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      uint64_t data = io_uring_cqe_get_data64(cqe);
      if (data == kWakeupTag) {
        wakeup_in_kernel_ = false;
        woke = true;
        continue;
      }
      if (data == 0) continue;  // poll_remove
      --in_flight_;
      Finish(reinterpret_cast<IoRequest*>(data), cqe->res, sink, &finished);
    }
    io_uring_cq_advance(&ring_, seen);
    if (woke) {
      uint64_t value;
      ssize_t ignored = ::read(wakeup_fd_, &value, sizeof(value));  // non-blocking eventfd
      (void)ignored;
    }
    if (woke || finished >= wait_min || (in_flight_ == 0 && !wakeup_in_kernel_)) break;
    if (wait == 0 && seen == 0) break;
  }
  Prepare();
  if (io_uring_sq_ready(&ring_) > 0) {
    int rc = io_uring_submit(&ring_);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      return Status::FromErrno(-rc, "io_uring_submit");
    }
  }
  return finished;
}

}  // namespace strata::io
