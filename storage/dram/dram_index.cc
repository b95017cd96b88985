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
      buckets_count_(kInitialBuckets) {}

DramHashMap::Buckets DramHashMap::Allocate(uint64_t n) const {
  Buckets b;
  if (n * sizeof(Entry) >= kDramArenaAlignBytes) {
    auto arena = DramArena::Create(n, sizeof(Entry), huge_pages_);
    if (arena.ok()) {
      b.large = std::move(arena).value();
      b.data = reinterpret_cast<Entry*>(b.large->base());
      for (uint64_t i = 0; i < n; ++i) b.data[i] = Entry{kDramNoSlot, 0};
      return b;
    }
  }
  b.small.assign(n, Entry{kDramNoSlot, 0});
  b.data = b.small.data();
  return b;
}

void DramHashMap::Insert(uint64_t hash, uint32_t slot, bool dirty) {
  STRATA_ASSERT(slot != kDramNoSlot, "DramHashMap::Insert of the empty marker");
  // Grown by 5/4 once more than 7/8 full: the load stays in (0.7, 0.875].
  if ((size_ + 1) * kDramIndexLoadDen > buckets_count_ * kDramIndexLoadNum) Grow();
  const uint32_t tag = TagOf(hash);
  uint64_t i = Home(tag);
  while (buckets_[i].slot != kDramNoSlot) i = Step(i);
  buckets_[i] = Entry{slot, tag << 1 | (dirty ? 1u : 0u)};
  ++size_;
}

uint64_t DramHashMap::FindEntry(uint64_t hash, uint32_t slot) const {
  const uint32_t tag = TagOf(hash);
  for (uint64_t i = Home(tag);; i = Step(i)) {
    const Entry& e = buckets_[i];
    if (e.slot == kDramNoSlot) return buckets_count_;
    if (e.slot == slot && (e.tag_dirty >> 1) == tag) return i;
  }
}

bool DramHashMap::SetDirty(uint64_t hash, uint32_t slot, bool dirty) {
  const uint64_t i = FindEntry(hash, slot);
  if (i == buckets_count_) return false;
  buckets_[i].tag_dirty = (buckets_[i].tag_dirty & ~1u) | (dirty ? 1u : 0u);
  return true;
}

bool DramHashMap::Erase(uint64_t hash, uint32_t slot) {
  const uint64_t i = FindEntry(hash, slot);
  if (i == buckets_count_) return false;
  // Backward-shift: pull later entries of the probe run into the hole when
  // their home bucket does not lie cyclically in (hole, j].
  uint64_t hole = i;
  for (uint64_t j = Step(hole); buckets_[j].slot != kDramNoSlot; j = Step(j)) {
    const uint64_t home = Home(buckets_[j].tag_dirty >> 1);
    const bool home_in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
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
  const uint64_t old_count = buckets_count_;
  Buckets old = std::move(storage_);
  const uint64_t count = old_count + old_count / 4;
  STRATA_ASSERT(count < (uint64_t{1} << 31), "DramHashMap: a stripe outgrew its tag space");
  storage_ = Allocate(count);
  buckets_ = storage_.data;
  buckets_count_ = count;
  for (uint64_t k = 0; k < old_count; ++k) {
    const Entry& e = old.data[k];
    if (e.slot == kDramNoSlot) continue;
    uint64_t i = Home(e.tag_dirty >> 1);
    while (buckets_[i].slot != kDramNoSlot) i = Step(i);
    buckets_[i] = e;
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
