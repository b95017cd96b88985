// Aligned memory for O_DIRECT I/O and the alignment checks that guard it.
//
// AlignedBuffer owns a block of memory aligned to kIoAlignBytes (4 KiB) whose
// size is rounded up to a multiple of it; it is freed in the destructor.
// CheckDirectIo is the single place that decides whether a request may be
// issued on an O_DIRECT file and names what is misaligned when not.
//
// Thread safety: an AlignedBuffer is a value owned by one thread at a time;
// CheckDirectIo is a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "io/limits.h"
#include "strata/status.h"

namespace strata::io {

inline constexpr bool IsAligned(uint64_t value, size_t alignment = kIoAlignBytes) {
  return value % alignment == 0;
}
inline constexpr uint64_t AlignUp(uint64_t value, size_t alignment = kIoAlignBytes) {
  return (value + alignment - 1) / alignment * alignment;
}
inline constexpr uint64_t AlignDown(uint64_t value, size_t alignment = kIoAlignBytes) {
  return value / alignment * alignment;
}

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Allocates `size_bytes` rounded up to kIoAlignBytes, zero-filled.
  // ResourceExhausted when the memory cannot be had.
  [[nodiscard]] static Result<AlignedBuffer> Allocate(size_t size_bytes);

  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_bytes_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_bytes_ = 0;
};

// OK when a `op` ("read", "write") of `len` bytes at `offset` from/to `buf`
// may be issued on an O_DIRECT file; otherwise InvalidArgument naming the
// file, the offset, the length, the buffer address and what is misaligned.
[[nodiscard]] Status CheckDirectIo(std::string_view op, const std::string& path, uint64_t offset,
                                   size_t len, const void* buf);

}  // namespace strata::io
