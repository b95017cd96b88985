// IoRequest: one read, write or sync of a File, owned by the caller and
// filled in with its outcome by io::Ring or io::IoThreads.
//
// The caller sets the inputs, keeps the request (and its buffer) alive and
// untouched until it completes, then reads `status` and `bytes_done`. A read
// that returns fewer bytes than asked with an OK status stopped at the end of
// the file: `bytes_done < len` is how the end of a file is reported.
//
// Thread safety: a request belongs to one submission at a time.
#pragma once

#include <cstdint>

#include "io/env.h"
#include "strata/status.h"

namespace strata::io {

struct IoRequest {
  enum class Op : uint8_t {
    kRead,       // len bytes at offset into buf
    kWrite,      // len bytes from buf at offset
    kFsync,      // fsync(2) of the file (offset, buf, len unused)
    kFdatasync,  // fdatasync(2) of the file
  };

  // Inputs. For a File opened with O_DIRECT, offset, len and buf must be
  // multiples of kIoAlignBytes (4 KiB).
  Op op = Op::kRead;
  File* file = nullptr;
  uint64_t offset = 0;
  void* buf = nullptr;
  uint32_t len = 0;

  // Outputs, valid once the request has completed.
  Status status;
  uint32_t bytes_done = 0;

  // The submitter's cookie (IoThreads keeps its batch here); Ring leaves it
  // alone, like io_uring's user_data.
  void* context = nullptr;

  // io::Ring's bookkeeping while the request is in its ring (the list of
  // requests in flight, oldest first, and the deadline's cancel). Not for
  // callers; reset by Ring::Enqueue.
  struct RingState {
    IoRequest* prev = nullptr;
    IoRequest* next = nullptr;
    uint64_t issued_ns = 0;  // when the request (or its rest) entered the kernel
    int32_t held_res = 0;    // its result, held while its cancel is in the kernel
    bool res_held = false;   // the request's completion arrived before its cancel's
    bool cancel_in_kernel = false;
    bool cancelled = false;  // a deadline cancel was sent for it
  } ring;
};

inline const char* IoOpName(IoRequest::Op op) {
  switch (op) {
    case IoRequest::Op::kRead:
      return "read";
    case IoRequest::Op::kWrite:
      return "write";
    case IoRequest::Op::kFsync:
      return "fsync";
    case IoRequest::Op::kFdatasync:
      return "fdatasync";
  }
  return "unknown";
}

inline bool IsSync(IoRequest::Op op) {
  return op == IoRequest::Op::kFsync || op == IoRequest::Op::kFdatasync;
}

// OK when `req` may be issued: a file with an fd, a buffer where one is
// needed, a length within kIoRequestBytesMax, O_DIRECT alignment. Otherwise
// InvalidArgument naming the file, offset and what is wrong.
[[nodiscard]] Status ValidateIoRequest(const IoRequest& req);

// Executes `req` with pread/pwrite/fsync/fdatasync on its file's descriptor,
// moving at most `len` bytes from its start; sets status and bytes_done.
void ExecuteIoRequestBlocking(IoRequest* req, uint32_t len);

// The Status of a request that failed with errno `error`:
// "<op> of file <path> at offset <offset> length <len>: <strerror>".
[[nodiscard]] Status IoRequestError(const IoRequest& req, int error, const char* engine);

}  // namespace strata::io
