// BufferPool: a fixed set of equal, 4 KiB-aligned I/O buffers carved from one
// arena, so O_DIRECT reads and writes need no allocation on the hot path and
// io_uring can use them as registered (fixed) buffers.
//
// The arena is mapped with huge pages when the system has them reserved
// (MAP_HUGETLB), otherwise with normal pages advised for transparent huge
// pages, and bound to a NUMA node (the node of the I/O thread that uses it)
// before its pages are first touched.
//
// Thread safety: Acquire and Release may be called from any thread (a short
// mutex guards the free list). Ownership: the pool owns the arena; buffers
// handed out must be released before the pool is destroyed.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/mutex.h"
#include "strata/status.h"

namespace strata::io {

struct BufferPoolOptions {
  size_t buffer_bytes = 64 * 1024;  // rounded up to 4 KiB; larger serves bigger reads
  uint32_t buffer_count = 64;       // more buffers, more I/O in flight, more memory
  int numa_node = -1;               // -1: no binding (first touch)
  bool huge_pages = true;           // try MAP_HUGETLB first
};

class BufferPool {
 public:
  // InvalidArgument for a zero size or an arena above kBufferPoolBytesMax;
  // ResourceExhausted when the memory cannot be mapped.
  [[nodiscard]] static Result<std::unique_ptr<BufferPool>> Create(const BufferPoolOptions& options);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A free buffer of buffer_bytes(), or nullptr when all are in use.
  uint8_t* Acquire() EXCLUDES(mu_);
  // REQUIRES: `buf` came from this pool's Acquire and is not released yet.
  void Release(uint8_t* buf) EXCLUDES(mu_);

  bool Contains(const void* p) const;
  size_t buffer_bytes() const { return buffer_bytes_; }
  uint32_t buffer_count() const { return buffer_count_; }
  uint32_t free_count() const EXCLUDES(mu_);
  // The arena as one region, for Ring::RegisterBuffers.
  iovec region() const { return iovec{arena_, arena_bytes_}; }
  bool huge_pages() const { return huge_pages_; }
  int numa_node() const { return numa_node_; }

 private:
  BufferPool() = default;

  uint8_t* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  size_t buffer_bytes_ = 0;
  uint32_t buffer_count_ = 0;
  bool huge_pages_ = false;
  int numa_node_ = -1;
  mutable base::Mutex mu_;
  std::vector<uint32_t> free_ GUARDED_BY(mu_);  // indexes of free buffers
  std::vector<bool> in_use_ GUARDED_BY(mu_);    // catches double release
};

}  // namespace strata::io
