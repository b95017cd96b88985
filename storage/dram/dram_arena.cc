#include "storage/dram/dram_arena.h"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "base/assert.h"
#include "base/log.h"
#include "storage/dram/limits.h"

namespace strata::storage {
namespace {

// Applies MPOL_INTERLEAVE over every node with memory; false with errno set
// when the kernel refuses (no NUMA, or a sandbox that forbids mbind).
bool InterleaveRange(void* addr, uint64_t bytes) {
  if (numa_available() < 0) {
    errno = ENOSYS;
    return false;
  }
  struct bitmask* nodes = numa_get_mems_allowed();
  if (nodes == nullptr) return false;
  long rc = mbind(addr, bytes, MPOL_INTERLEAVE, nodes->maskp, nodes->size + 1, 0);
  int saved = errno;
  numa_bitmask_free(nodes);
  errno = saved;
  return rc == 0;
}

void LogPlainMemoryOnce(int error) {
  static std::once_flag once;
  std::call_once(once, [error] {
    STRATA_LOG_WARN("dram cache: no NUMA interleaving (%s); using plain memory",
                    std::strerror(error));
  });
}

}  // namespace

bool DramArena::NumaInterleaveSupported() {
  static const bool supported = [] {
    const uint64_t bytes = 1ull << 16;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    bool ok = InterleaveRange(p, bytes);
    munmap(p, bytes);
    return ok;
  }();
  return supported;
}

Result<std::unique_ptr<DramArena>> DramArena::Create(uint64_t slots, uint32_t slot_bytes,
                                                     bool huge_pages) {
  STRATA_ASSERT(slots > 0 && slot_bytes > 0, "DramArena needs at least one non-empty slot");
  uint64_t bytes = slots * slot_bytes;
  bytes = (bytes + kDramArenaAlignBytes - 1) / kDramArenaAlignBytes * kDramArenaAlignBytes;
  // Over-map by one alignment unit and trim, so the arena starts on a
  // huge-page boundary and every 2 MiB of it can be one huge page.
  void* raw = mmap(nullptr, bytes + kDramArenaAlignBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED) {
    return Status::FromErrno(errno, "dram arena: mmap of " + std::to_string(bytes) + " bytes");
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kDramArenaAlignBytes - 1) & ~(kDramArenaAlignBytes - 1);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t tail = start + bytes + kDramArenaAlignBytes - (aligned + bytes);
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + bytes), tail);
  void* p = reinterpret_cast<void*>(aligned);
  std::unique_ptr<DramArena> arena(new DramArena(static_cast<std::byte*>(p), bytes, slot_bytes));
  if (InterleaveRange(p, bytes)) {
    arena->interleaved_ = true;
  } else {
    LogPlainMemoryOnce(errno);
  }
  if (huge_pages && madvise(p, bytes, MADV_HUGEPAGE) == 0) arena->huge_pages_advised_ = true;
  return arena;
}

DramArena::~DramArena() { munmap(base_, mapped_bytes_); }

}  // namespace strata::storage
