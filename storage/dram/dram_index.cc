#include "storage/dram/dram_index.h"

#include <bit>
#include <mutex>

#include "base/assert.h"
#include "storage/dram/limits.h"

namespace strata::storage {
namespace {
constexpr uint64_t kInitialBuckets = 16;
}  // namespace

DramHashMap::DramHashMap(bool huge_pages)
    : huge_pages_(huge_pages),
      storage_(Allocate(kInitialBuckets)),
      buckets_(storage_.data),
      mask_(kInitialBuckets - 1) {}

DramHashMap::Buckets DramHashMap::Allocate(uint64_t n) const {
  Buckets b;
  if (n * sizeof(Entry) >= kDramArenaAlignBytes) {
    auto arena = DramArena::Create(n, sizeof(Entry), huge_pages_);
    if (arena.ok()) {
      b.large = std::move(arena).value();
      b.data = reinterpret_cast<Entry*>(b.large->base());
      for (uint64_t i = 0; i < n; ++i) b.data[i] = Entry{0, kDramNoSlot};
      return b;
    }
  }
  b.small.assign(n, Entry{0, kDramNoSlot});
  b.data = b.small.data();
  return b;
}

void DramHashMap::Insert(Key key, uint64_t hash, uint32_t slot) {
  STRATA_ASSERT(slot != kDramNoSlot, "DramHashMap::Insert of the empty marker");
  // Load factor at most 3/4 keeps linear probes short.
  if ((size_ + 1) * 4 > (mask_ + 1) * 3) Grow();
  uint64_t i = hash & mask_;
  while (buckets_[i].slot != kDramNoSlot) {
    STRATA_ASSERT(buckets_[i].key != key, "DramHashMap::Insert of a present key");
    i = (i + 1) & mask_;
  }
  buckets_[i] = Entry{key, slot};
  ++size_;
}

bool DramHashMap::Erase(Key key, uint64_t hash) {
  uint64_t i = hash & mask_;
  for (;; i = (i + 1) & mask_) {
    if (buckets_[i].slot == kDramNoSlot) return false;
    if (buckets_[i].key == key) break;
  }
  // Backward-shift: pull later entries of the probe run into the hole when
  // their home bucket does not lie cyclically in (hole, j].
  uint64_t hole = i;
  for (uint64_t j = (hole + 1) & mask_; buckets_[j].slot != kDramNoSlot; j = (j + 1) & mask_) {
    uint64_t home = DramKeyHash(buckets_[j].key) & mask_;
    bool home_in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
    if (!home_in_range) {
      buckets_[hole] = buckets_[j];
      hole = j;
    }
  }
  buckets_[hole].slot = kDramNoSlot;
  --size_;
  return true;
}

void DramHashMap::Grow() {
  const uint64_t old_count = mask_ + 1;
  Buckets old = std::move(storage_);
  storage_ = Allocate(old_count * 2);
  buckets_ = storage_.data;
  mask_ = old_count * 2 - 1;
  size_ = 0;
  for (uint64_t k = 0; k < old_count; ++k) {
    const Entry& e = old.data[k];
    if (e.slot == kDramNoSlot) continue;
    uint64_t i = DramKeyHash(e.key) & mask_;
    while (buckets_[i].slot != kDramNoSlot) i = (i + 1) & mask_;
    buckets_[i] = e;
    ++size_;
  }
}

DramIndex::DramIndex(uint32_t stripes, bool huge_pages)
    : count_(stripes),
      shift_(64 - static_cast<uint32_t>(std::countr_zero(stripes))),
      stripes_(new Stripe[stripes]) {
  STRATA_ASSERT(std::has_single_bit(stripes), "DramIndex stripes must be a power of two");
  for (uint32_t i = 0; i < stripes; ++i) stripes_[i].map = DramHashMap(huge_pages);
}

uint64_t DramIndex::bytes() const {
  uint64_t total = sizeof(Stripe) * count_;
  for (uint32_t i = 0; i < count_; ++i) {
    base::ReaderLock lock(&stripes_[i].mu);
    total += stripes_[i].map.bytes();
  }
  return total;
}

}  // namespace strata::storage
