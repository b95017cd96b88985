#include "io/io_request.h"

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

}  // namespace strata::io
