#include "io/buffer_pool.h"

#include <numa.h>
#include <sys/mman.h>

#include <cstring>

#include "base/assert.h"
#include "base/log.h"
#include "io/aligned.h"
#include "io/limits.h"

namespace strata::io {

Result<std::unique_ptr<BufferPool>> BufferPool::Create(const BufferPoolOptions& options) {
  if (options.buffer_bytes == 0 || options.buffer_count == 0) {
    return Status::InvalidArgument("BufferPool: buffer_bytes and buffer_count must be positive");
  }
  const size_t buffer_bytes = AlignUp(options.buffer_bytes);
  if (buffer_bytes > kBufferPoolBytesMax / options.buffer_count) {
    return Status::InvalidArgument("BufferPool: " + std::to_string(options.buffer_count) + " x " +
                                   std::to_string(buffer_bytes) + " bytes exceeds " +
                                   std::to_string(kBufferPoolBytesMax));
  }
  std::unique_ptr<BufferPool> pool(new BufferPool());
  pool->buffer_bytes_ = buffer_bytes;
  pool->buffer_count_ = options.buffer_count;
  const size_t huge_page_bytes = size_t{2} << 20;
  size_t bytes = buffer_bytes * options.buffer_count;
  void* p = MAP_FAILED;
  if (options.huge_pages) {
    size_t huge_bytes = AlignUp(bytes, huge_page_bytes);
    p = ::mmap(nullptr, huge_bytes, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p != MAP_FAILED) {
      bytes = huge_bytes;
      pool->huge_pages_ = true;
    }
  }
  if (p == MAP_FAILED) {
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return Status::ResourceExhausted("BufferPool: mmap of " + std::to_string(bytes) +
                                       " bytes failed: " + std::strerror(errno));
    }
    ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only; fine to be refused
  }
  pool->arena_ = static_cast<uint8_t*>(p);
  pool->arena_bytes_ = bytes;
  if (options.numa_node >= 0 && numa_available() >= 0 && options.numa_node <= numa_max_node()) {
    numa_tonode_memory(p, bytes, options.numa_node);  // before first touch
    pool->numa_node_ = options.numa_node;
  }
  std::memset(p, 0, bytes);  // fault the pages in now, on the bound node
  {
    base::MutexLock lock(&pool->mu_);  // not shared yet; taken so the analysis sees it held
    pool->free_.reserve(options.buffer_count);
    for (uint32_t i = options.buffer_count; i > 0; --i) pool->free_.push_back(i - 1);
    pool->in_use_.assign(options.buffer_count, false);
  }
  return pool;
}

BufferPool::~BufferPool() {
  if (arena_ != nullptr) ::munmap(arena_, arena_bytes_);
}

uint8_t* BufferPool::Acquire() {
  base::MutexLock lock(&mu_);
  if (free_.empty()) return nullptr;
  uint32_t index = free_.back();
  free_.pop_back();
  in_use_[index] = true;
  return arena_ + size_t{index} * buffer_bytes_;
}

void BufferPool::Release(uint8_t* buf) {
  STRATA_ASSERT(Contains(buf), "BufferPool::Release of a buffer from elsewhere");
  size_t offset = static_cast<size_t>(buf - arena_);
  STRATA_ASSERT(offset % buffer_bytes_ == 0, "BufferPool::Release of an interior pointer");
  auto index = static_cast<uint32_t>(offset / buffer_bytes_);
  base::MutexLock lock(&mu_);
  STRATA_ASSERT(in_use_[index], "BufferPool::Release of a buffer twice");
  in_use_[index] = false;
  free_.push_back(index);
}

bool BufferPool::Contains(const void* p) const {
  auto addr = reinterpret_cast<uintptr_t>(p);
  auto base = reinterpret_cast<uintptr_t>(arena_);
  return addr >= base && addr < base + size_t{buffer_bytes_} * buffer_count_;
}

uint32_t BufferPool::free_count() const {
  base::MutexLock lock(&mu_);
  return static_cast<uint32_t>(free_.size());
}

}  // namespace strata::io
