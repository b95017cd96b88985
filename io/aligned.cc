#include "io/aligned.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace strata::io {

Result<AlignedBuffer> AlignedBuffer::Allocate(size_t size_bytes) {
  AlignedBuffer buffer;
  size_t rounded = AlignUp(size_bytes == 0 ? 1 : size_bytes);
  void* p = std::aligned_alloc(kIoAlignBytes, rounded);
  if (p == nullptr) {
    return Status::ResourceExhausted("AlignedBuffer: cannot allocate " + std::to_string(rounded) +
                                     " bytes");
  }
  std::memset(p, 0, rounded);
  buffer.data_ = static_cast<uint8_t*>(p);
  buffer.size_bytes_ = rounded;
  return buffer;
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

Status CheckDirectIo(std::string_view op, const std::string& path, uint64_t offset, size_t len,
                     const void* buf) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(buf);
  const char* what = nullptr;
  if (!IsAligned(offset)) {
    what = "offset";
  } else if (!IsAligned(len)) {
    what = "length";
  } else if (!IsAligned(addr)) {
    what = "buffer address";
  }
  if (what == nullptr) return Status::Ok();
  char msg[512];
  std::snprintf(msg, sizeof(msg),
                "O_DIRECT %.*s of file %s at offset %" PRIu64
                " length %zu buffer %p: %s is not "
                "a multiple of %zu bytes",
                static_cast<int>(op.size()), op.data(), path.c_str(), offset, len, buf, what,
                kIoAlignBytes);
  return Status::InvalidArgument(msg);
}

}  // namespace strata::io
