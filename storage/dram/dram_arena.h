// DramArena: one large anonymous mapping of fixed-size row slots whose pages
// are interleaved across all NUMA nodes (mbind MPOL_INTERLEAVE), so that no
// socket's memory bandwidth becomes the bottleneck of tier T1.
//
// The mapping reserves address space only (MAP_NORESERVE); a page becomes
// resident when a slot in it is first written. With `huge_pages` the range is
// advised MADV_HUGEPAGE (transparent huge pages): MAP_HUGETLB is not used
// because it needs a pre-reserved pool and faults with SIGBUS when that pool
// runs dry. Where the kernel or libnuma has no NUMA support (or a sandbox
// forbids mbind), the arena is plain memory and one notice is logged per
// process.
//
// Thread safety: Slot() is a pure function; callers synchronise access to
// slot contents. Ownership: the arena owns its mapping (unmapped in the
// destructor); move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "strata/status.h"

namespace strata::storage {

class DramArena {
 public:
  // Maps `slots` slots of `slot_bytes` each. REQUIRES: slots > 0, slot_bytes > 0.
  static Result<std::unique_ptr<DramArena>> Create(uint64_t slots, uint32_t slot_bytes,
                                                   bool huge_pages);
  ~DramArena();
  DramArena(const DramArena&) = delete;
  DramArena& operator=(const DramArena&) = delete;

  std::byte* Slot(uint64_t slot) const { return base_ + slot * slot_bytes_; }
  uint32_t slot_bytes() const { return slot_bytes_; }
  std::byte* base() const { return base_; }
  uint64_t mapped_bytes() const { return mapped_bytes_; }
  // True when the pages follow MPOL_INTERLEAVE over all nodes.
  bool interleaved() const { return interleaved_; }
  bool huge_pages_advised() const { return huge_pages_advised_; }

  // True when this kernel and libnuma accept MPOL_INTERLEAVE (probed once).
  static bool NumaInterleaveSupported();

 private:
  DramArena(std::byte* base, uint64_t mapped_bytes, uint32_t slot_bytes)
      : base_(base), mapped_bytes_(mapped_bytes), slot_bytes_(slot_bytes) {}

  std::byte* const base_;
  const uint64_t mapped_bytes_;
  const uint32_t slot_bytes_;
  bool interleaved_ = false;
  bool huge_pages_advised_ = false;
};

}  // namespace strata::storage
