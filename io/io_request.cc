#include "io/io_request.h"

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>

#include "io/aligned.h"
#include "io/limits.h"

namespace strata::io {

Status ValidateIoRequest(const IoRequest& req) {
  if (req.file == nullptr) return Status::InvalidArgument("I/O request without a file");
  if (req.file->fd() < 0) {
    return Status::InvalidArgument("I/O request on file " + req.file->path() +
                                   " which has no OS descriptor");
  }
  if (IsSync(req.op)) return Status::Ok();
  if (req.buf == nullptr && req.len > 0) {
    return Status::InvalidArgument(std::string(IoOpName(req.op)) + " of file " + req.file->path() +
                                   " at offset " + std::to_string(req.offset) + " has no buffer");
  }
  if (req.len > kIoRequestBytesMax) {
    return Status::InvalidArgument(std::string(IoOpName(req.op)) + " of file " + req.file->path() +
                                   " at offset " + std::to_string(req.offset) + ": length " +
                                   std::to_string(req.len) + " exceeds " +
                                   std::to_string(kIoRequestBytesMax));
  }
  if (req.file->direct()) {
    return CheckDirectIo(IoOpName(req.op), req.file->path(), req.offset, req.len, req.buf);
  }
  return Status::Ok();
}

Status IoRequestError(const IoRequest& req, int error, const char* engine) {
  char what[96];
  std::snprintf(what, sizeof(what), " at offset %" PRIu64 " length %u", req.offset + req.bytes_done,
                req.len - req.bytes_done);
  return Status::FromErrno(
      error, std::string(engine) + " " + IoOpName(req.op) + " of file " + req.file->path() + what);
}

void ExecuteIoRequestBlocking(IoRequest* req, uint32_t len) {
  req->status = Status::Ok();
  req->bytes_done = 0;
  const int fd = req->file->fd();
  if (IsSync(req->op)) {
    int rc = req->op == IoRequest::Op::kFsync ? ::fsync(fd) : ::fdatasync(fd);
    if (rc != 0) req->status = IoRequestError(*req, errno, "psync");
    return;
  }
  auto* buf = static_cast<uint8_t*>(req->buf);
  const bool read = req->op == IoRequest::Op::kRead;
  while (req->bytes_done < len) {
    const size_t want = len - req->bytes_done;
    const auto offset = static_cast<off_t>(req->offset + req->bytes_done);
    ssize_t n = read ? ::pread(fd, buf + req->bytes_done, want, offset)
                     : ::pwrite(fd, buf + req->bytes_done, want, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      req->status = IoRequestError(*req, errno, read ? "pread" : "pwrite");
      return;
    }
    if (n == 0) {
      if (!read) req->status = IoRequestError(*req, EIO, "pwrite wrote nothing:");
      return;  // a read: end of file
    }
    req->bytes_done += static_cast<uint32_t>(n);
    if (read && req->file->direct() && !IsAligned(req->bytes_done)) return;  // end of file
  }
}

}  // namespace strata::io
