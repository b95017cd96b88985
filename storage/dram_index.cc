#include "storage/dram_index.h"

#include <bit>
#include <mutex>

#include "strata/assert.h"

namespace strata::storage {
namespace {
constexpr uint64_t kInitialBuckets = 16;
}  // namespace

DramHashMap::DramHashMap()
    : buckets_(kInitialBuckets, Entry{0, kDramNoSlot}), mask_(kInitialBuckets - 1) {}

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
  std::vector<Entry> old;
  old.swap(buckets_);
  uint64_t n = (mask_ + 1) * 2;
  buckets_.assign(n, Entry{0, kDramNoSlot});
  mask_ = n - 1;
  size_ = 0;
  for (const Entry& e : old) {
    if (e.slot == kDramNoSlot) continue;
    uint64_t i = DramKeyHash(e.key) & mask_;
    while (buckets_[i].slot != kDramNoSlot) i = (i + 1) & mask_;
    buckets_[i] = e;
    ++size_;
  }
}

DramIndex::DramIndex(uint32_t stripes)
    : count_(stripes),
      shift_(64 - static_cast<uint32_t>(std::countr_zero(stripes))),
      stripes_(new Stripe[stripes]) {
  STRATA_ASSERT(std::has_single_bit(stripes), "DramIndex stripes must be a power of two");
}

uint64_t DramIndex::bytes() const {
  uint64_t total = sizeof(Stripe) * count_;
  for (uint32_t i = 0; i < count_; ++i) {
    std::shared_lock lock(stripes_[i].mu);
    total += stripes_[i].map.bytes();
  }
  return total;
}

}  // namespace strata::storage
