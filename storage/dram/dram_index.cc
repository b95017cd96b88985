#include "storage/dram/dram_index.h"

#include <bit>
#include <mutex>

#include "base/assert.h"
#include "storage/dram/limits.h"

namespace strata::storage {
namespace {
constexpr uint64_t kInitialBuckets = 16;
// The next bucket count: 9/8 of `count`.
uint64_t GrownCount(uint64_t count) { return count * kDramIndexGrowNum / kDramIndexGrowDen; }
}  // namespace

DramHashMap::DramHashMap(bool huge_pages)
    : huge_pages_(huge_pages),
      storage_(Allocate(kInitialBuckets, huge_pages)),
      buckets_(storage_.data),
      buckets_count_(kInitialBuckets) {}

DramHashMap::DramHashMap(Entry* buckets, uint64_t count)
    : owns_(false), buckets_(buckets), buckets_count_(count) {}

DramHashMap::Buckets DramHashMap::Allocate(uint64_t n, bool huge_pages) {
  Buckets b;
  if (n * sizeof(Entry) >= kDramArenaAlignBytes) {
    auto arena = DramArena::Create(n, sizeof(Entry), huge_pages);
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
  // Grown by 9/8 once more than 7/8 full: the load stays in (0.77, 0.875].
  if (NeedsGrow()) {
    STRATA_ASSERT(owns_, "DramHashMap::Insert past the load bound of its index's segment");
    Grow();
  }
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

bool DramHashMap::NeedsGrow() const {
  return (size_ + 1) * kDramIndexLoadDen > buckets_count_ * kDramIndexLoadNum;
}

void DramHashMap::MoveTo(Entry* buckets, uint64_t count) {
  STRATA_ASSERT(count < (uint64_t{1} << 31), "DramHashMap: a stripe outgrew its tag space");
  const Entry* old = buckets_;
  const uint64_t old_count = buckets_count_;
  buckets_ = buckets;
  buckets_count_ = count;
  for (uint64_t k = 0; k < old_count; ++k) {
    const Entry& e = old[k];
    if (e.slot == kDramNoSlot) continue;
    uint64_t i = Home(e.tag_dirty >> 1);
    while (buckets_[i].slot != kDramNoSlot) i = Step(i);
    buckets_[i] = e;
  }
}

void DramHashMap::Grow() {
  Buckets old = std::move(storage_);
  const uint64_t count = GrownCount(buckets_count_);
  storage_ = Allocate(count, huge_pages_);
  MoveTo(storage_.data, count);
}

DramIndex::DramIndex(uint32_t stripes, bool huge_pages)
    : count_(stripes),
      shift_(64 - static_cast<uint32_t>(std::countr_zero(stripes))),
      huge_pages_(huge_pages),
      stripes_(new Stripe[stripes]),
      buckets_(DramHashMap::Allocate(uint64_t{stripes} * kInitialBuckets, huge_pages)),
      segment_(kInitialBuckets) {
  STRATA_ASSERT(std::has_single_bit(stripes), "DramIndex stripes must be a power of two");
  for (uint32_t i = 0; i < stripes; ++i) {
    base::WriterLock lock(&stripes_[i].mu);  // not shared yet; for the analysis
    stripes_[i].map = DramHashMap(buckets_.data + uint64_t{i} * segment_, segment_);
  }
}

void DramIndex::ReserveOne(uint32_t i) NO_THREAD_SAFETY_ANALYSIS {
  // Only the caller changes maps, so reading a map without its lock races
  // with nothing but readers.
  if (!stripes_[i].map.NeedsGrow()) return;
  const uint64_t segment = GrownCount(segment_);
  DramHashMap::Buckets grown = DramHashMap::Allocate(uint64_t{count_} * segment, huge_pages_);
  for (uint32_t k = 0; k < count_; ++k) {
    base::WriterLock lock(&stripes_[k].mu);
    stripes_[k].map.MoveTo(grown.data + uint64_t{k} * segment, segment);
  }
  // Every stripe has moved under its exclusive lock: no lookup reads the
  // old array any more.
  buckets_ = std::move(grown);
  segment_ = segment;
}

}  // namespace strata::storage
