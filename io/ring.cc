#include "io/ring.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/log.h"

namespace strata::io {
namespace {
// user_data of the wakeup poll; requests are pointers, never this value.
constexpr uint64_t kWakeupTag = 1;
// user_data of a cancel: its request's address with the low bit set
// (requests are 8-byte aligned; kWakeupTag is checked first).
constexpr uint64_t kCancelBit = 1;

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
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
  while (in_flight_ > 0 || wakeup_in_kernel_ || cancels_in_kernel_ > 0) {
    io_uring_submit(&ring_);
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring_, &cqe) < 0) break;
    uint64_t data = io_uring_cqe_get_data64(cqe);
    if (data == kWakeupTag) {
      wakeup_in_kernel_ = false;
    } else if (data == LIBURING_UDATA_TIMEOUT) {
    } else if ((data & kCancelBit) != 0) {
      --cancels_in_kernel_;
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
  req->ring = {};
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
  io_uring_sqe_set_data(sqe, req);
  if (held_count_ > 0 && !IsSync(req->op)) {  // SimulateHeldRequests
    --held_count_;
    io_uring_prep_read(sqe, held_fd_, &held_sink_, sizeof(held_sink_), ~uint64_t{0});
    io_uring_sqe_set_data(sqe, req);
    return;
  }
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

void Ring::Link(IoRequest* req, uint64_t now_ns) {
  req->ring.issued_ns = now_ns;
  req->ring.prev = newest_;
  req->ring.next = nullptr;
  if (newest_ != nullptr) {
    newest_->ring.next = req;
  } else {
    oldest_ = req;
  }
  newest_ = req;
}

void Ring::Unlink(IoRequest* req) {
  IoRequest* prev = req->ring.prev;
  IoRequest* next = req->ring.next;
  (prev != nullptr ? prev->ring.next : oldest_) = next;
  (next != nullptr ? next->ring.prev : newest_) = prev;
  req->ring.prev = req->ring.next = nullptr;
}

bool Ring::CancelOverdue(uint64_t now_ns) {
  if (options_.request_deadline_ms == 0) return false;
  const uint64_t deadline_ns = uint64_t{options_.request_deadline_ms} * 1000000;
  bool sent = false;
  // Each overdue request moves to the back, re-armed: at most one pass.
  for (uint32_t n = in_flight_; n > 0 && oldest_ != nullptr; --n) {
    IoRequest* req = oldest_;
    if (now_ns - req->ring.issued_ns < deadline_ns) break;
    if (!req->ring.cancel_in_kernel) {
      // One completion slot for the cancel, as for a request.
      if (in_flight_ + cancels_in_kernel_ + 2 >= in_flight_max_) break;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
      io_uring_prep_cancel64(sqe, reinterpret_cast<uint64_t>(req), 0);
      io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(req) | kCancelBit);
      req->ring.cancel_in_kernel = true;
      req->ring.cancelled = true;
      ++cancels_in_kernel_;
      stats_.deadline_cancels.fetch_add(1, std::memory_order_relaxed);
      sent = true;
    }
    Unlink(req);
    Link(req, now_ns);
  }
  return sent;
}

void Ring::Reap(uint64_t data, int res, CompletionSink* sink, uint32_t* finished) {
  if ((data & kCancelBit) != 0) {
    auto* req = reinterpret_cast<IoRequest*>(data & ~kCancelBit);
    --cancels_in_kernel_;
    req->ring.cancel_in_kernel = false;
    if (req->ring.res_held) {  // the request came back first; it may finish now
      req->ring.res_held = false;
      Finish(req, req->ring.held_res, sink, finished);
    } else if (res != 0) {
      // Running (-EALREADY) or not found (-ENOENT): it stays in the list and
      // is cancelled again at its next deadline.
      stats_.cancels_missed.fetch_add(1, std::memory_order_relaxed);
      if (!miss_logged_) {
        miss_logged_ = true;
        struct stat st {};
        const long long size = ::fstat(req->file->fd(), &st) == 0 ? st.st_size : -1;
        STRATA_LOG_WARN(
            "io_uring holds the %s of file %s at offset %llu length %u (file size "
            "%lld) past its deadline of %u ms and its cancel failed (%s); waiting on",
            IoOpName(req->op), req->file->path().c_str(),
            static_cast<unsigned long long>(req->offset), req->len, size,
            options_.request_deadline_ms, std::strerror(-res));
      }
    }
    return;  // res 0: the request's own completion (-ECANCELED) follows
  }
  auto* req = reinterpret_cast<IoRequest*>(data);
  --in_flight_;
  Unlink(req);
  if (req->ring.cancel_in_kernel) {  // the cancel's completion still refers to it
    req->ring.held_res = res;
    req->ring.res_held = true;
    return;
  }
  Finish(req, res, sink, finished);
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
  // Keep completions within the completion queue: one per request or cancel
  // in flight.
  const uint64_t now_ns = options_.request_deadline_ms > 0 ? NowNs() : 0;
  while (!pending_.empty() && in_flight_ + cancels_in_kernel_ + 1 < in_flight_max_) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) break;
    IoRequest* req = pending_.front();
    PrepareOne(sqe, req);
    pending_.pop_front();
    req->ring.cancelled = false;
    Link(req, now_ns);
    ++in_flight_;
    ++prepared;
  }
  return prepared;
}

void Ring::Finish(IoRequest* req, int res, CompletionSink* sink, uint32_t* finished) {
  const bool sync = IsSync(req->op);
  if (req->ring.cancelled && (res == -ECANCELED || res == -EINTR)) {
    // Cancelled at its deadline: done again, whole, on this thread (reads and
    // writes of the same bytes are idempotent).
    if (!redo_logged_) {
      redo_logged_ = true;
      STRATA_LOG_WARN(
          "io_uring held the %s of file %s at offset %llu for over %u ms; cancelled "
          "and done with pread/pwrite (further ones are counted, not logged)",
          IoOpName(req->op), req->file->path().c_str(),
          static_cast<unsigned long long>(req->offset), options_.request_deadline_ms);
    }
    ExecuteIoRequestBlocking(req, req->len);
    stats_.requests_redone.fetch_add(1, std::memory_order_relaxed);
    sink->OnComplete(req);
    ++*finished;
    return;
  }
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

int Ring::SubmitAndWait(unsigned wait) {
  if (wait == 0 || options_.request_deadline_ms == 0 || oldest_ == nullptr) {
    return io_uring_submit_and_wait(&ring_, wait);
  }
  const uint64_t deadline_ns =
      oldest_->ring.issued_ns + uint64_t{options_.request_deadline_ms} * 1000000;
  const uint64_t now_ns = NowNs();
  // At least 1 ms: the deadline is checked after the wait, not to the tick.
  const uint64_t wait_ns = deadline_ns > now_ns + 1000000 ? deadline_ns - now_ns : 1000000;
  __kernel_timespec ts{};
  ts.tv_sec = static_cast<int64_t>(wait_ns / 1000000000);
  ts.tv_nsec = static_cast<long long>(wait_ns % 1000000000);
  io_uring_cqe* cqe = nullptr;
  return io_uring_submit_and_wait_timeout(&ring_, &cqe, wait, &ts, nullptr);
}

Result<uint32_t> Ring::Poll(uint32_t wait_min, CompletionSink* sink) {
  uint32_t finished = 0;
  for (;;) {
    Prepare();
    const bool nothing_to_wait_for =
        in_flight_ == 0 && !wakeup_in_kernel_ && cancels_in_kernel_ == 0;
    unsigned wait = (finished >= wait_min || nothing_to_wait_for) ? 0 : 1;
    int rc = SubmitAndWait(wait);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME) {
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
      if (data == 0 || data == LIBURING_UDATA_TIMEOUT) continue;  // poll_remove, wait timeout
      Reap(data, cqe->res, sink, &finished);
    }
    io_uring_cq_advance(&ring_, seen);
    const bool cancelled = options_.request_deadline_ms > 0 && CancelOverdue(NowNs());
    if (woke) {
      uint64_t value;
      ssize_t ignored = ::read(wakeup_fd_, &value, sizeof(value));  // non-blocking eventfd
      (void)ignored;
    }
    if (woke || finished >= wait_min) break;
    if (in_flight_ == 0 && !wakeup_in_kernel_ && cancels_in_kernel_ == 0) break;
    if (wait == 0 && seen == 0 && !cancelled) break;
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
