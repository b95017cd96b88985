#include "storage/dram/dram_claims.h"

#include <algorithm>
#include <utility>

#include "base/assert.h"
#include "storage/dram/dram_index.h"

namespace strata::storage {
namespace {
constexpr uint64_t kInitialEntries = 1024;
}  // namespace

uint32_t DramKeyClaims::NewOwner() {
  if (free_owners_.empty()) {
    STRATA_ASSERT(owners_ < UINT32_MAX, "DramKeyClaims: too many owners");
    return owners_++;
  }
  const uint32_t owner = free_owners_.back();
  free_owners_.pop_back();
  return owner;
}

void DramKeyClaims::FreeOwner(uint32_t owner) { free_owners_.push_back(owner); }

uint64_t DramKeyClaims::HomeOf(const Entry& e) const {
  return Mix(e.table_plus1 - 1, DramKeyHash(e.key)) & mask_;
}

void DramKeyClaims::Grow() {
  std::vector<Entry> old = std::move(entries_);
  const uint64_t n = old.empty() ? kInitialEntries : old.size() * 2;
  STRATA_ASSERT(n <= (uint64_t{1} << 32), "DramKeyClaims: too many claims");
  entries_.assign(n, Entry{0, 0, 0});
  mask_ = n - 1;
  for (const Entry& e : old) {
    if (e.table_plus1 == 0) continue;
    uint64_t at = HomeOf(e);
    while (entries_[at].table_plus1 != 0) at = (at + 1) & mask_;
    entries_[at] = e;
  }
}

void DramKeyClaims::Clear() {
  std::fill(entries_.begin(), entries_.end(), Entry{0, 0, 0});
  size_ = 0;
}

void DramKeyClaims::Remove(uint32_t table, Key key, uint64_t hash) {
  uint64_t at = Mix(table, hash) & mask_;
  while (!(entries_[at].table_plus1 == table + 1 && entries_[at].key == key)) {
    STRATA_ASSERT(entries_[at].table_plus1 != 0, "DramKeyClaims::Remove of an unclaimed key");
    at = (at + 1) & mask_;
  }
  // Backward shift: an entry after the hole moves into it when its home lies
  // cyclically at or before the hole.
  uint64_t hole = at;
  for (uint64_t next = (hole + 1) & mask_; entries_[next].table_plus1 != 0;
       next = (next + 1) & mask_) {
    const Entry& e = entries_[next];
    const uint64_t home = HomeOf(e);
    // Movable when home is not in (hole, next].
    const bool in_range =
        hole <= next ? (home > hole && home <= next) : (home > hole || home <= next);
    if (in_range) continue;
    entries_[hole] = e;
    hole = next;
  }
  entries_[hole] = Entry{0, 0, 0};
  --size_;
}

}  // namespace strata::storage
