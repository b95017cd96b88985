#include "storage/dram/dram_index.h"

#include <bit>
#include <mutex>

#include "base/assert.h"
#include "storage/dram/limits.h"

namespace strata::storage {
namespace {
constexpr uint64_t kB = DramHashMap::kBucketEntries;
constexpr uint64_t kInitialBuckets = 2 * kB;
// The next entry count: 9/8 of `count`, rounded up to whole buckets.
uint64_t GrownCount(uint64_t count) {
  return (count * kDramIndexGrowNum / kDramIndexGrowDen + kB - 1) / kB * kB;
}
}  // namespace

DramHashMap::DramHashMap(bool huge_pages)
    : huge_pages_(huge_pages),
      storage_(Allocate(kInitialBuckets, huge_pages)),
      buckets_(storage_.data),
      count_(kInitialBuckets),
      lines_(kInitialBuckets / kB) {}

DramHashMap::DramHashMap(Entry* buckets, uint64_t count)
    : owns_(false), buckets_(buckets), count_(count), lines_(count / kB) {
  STRATA_ASSERT(count % kB == 0 && count > 0, "DramHashMap: entries not whole buckets");
  STRATA_ASSERT(reinterpret_cast<uintptr_t>(buckets) % 64 == 0, "DramHashMap: unaligned buckets");
}

DramHashMap::Buckets DramHashMap::Allocate(uint64_t n, bool huge_pages) {
  STRATA_ASSERT(n % kB == 0, "DramHashMap: entries not whole buckets");
  Buckets b;
  if (n * sizeof(Entry) >= kDramArenaAlignBytes) {
    auto arena = DramArena::Create(n, sizeof(Entry), huge_pages);
    if (arena.ok()) {
      b.large = std::move(arena).value();
      b.data = reinterpret_cast<Entry*>(b.large->base());  // 2 MiB aligned
      for (uint64_t i = 0; i < n; ++i) b.data[i] = Entry{kDramNoSlot, 0};
      return b;
    }
  }
  // One bucket more, so that the first whole line can start the buckets.
  b.small.assign(n + kB, Entry{kDramNoSlot, 0});
  const uintptr_t at = reinterpret_cast<uintptr_t>(b.small.data());
  b.data = reinterpret_cast<Entry*>((at + 63) / 64 * 64);
  return b;
}

uint32_t DramHashMap::CountOf(uint64_t b) const {
  uint32_t count = 0;
  for (uint32_t k = 0; k < kB; ++k) count |= (buckets_[b * kB + k].tag_dirty >> 31) << k;
  return count;
}

void DramHashMap::SetCount(uint64_t b, uint32_t count) {
  for (uint32_t k = 0; k < kB; ++k) {
    uint32_t& td = buckets_[b * kB + k].tag_dirty;
    td = (td & ~kCountBit) | ((count >> k) & 1) << 31;
  }
}

void DramHashMap::Place(uint32_t tag, uint32_t slot, uint32_t dirty) {
  // At most 7/8 full: some bucket has a free entry.
  for (uint64_t b = Home(tag);; b = Step(b)) {
    const uint32_t k = FreeIn(b);
    if (k != kBucketEntries) {
      Entry& e = buckets_[b * kB + k];
      e.slot = slot;
      e.tag_dirty = (e.tag_dirty & kCountBit) | tag << 1 | dirty;
      return;
    }
    const uint32_t count = CountOf(b);
    if (count < kCountMax) SetCount(b, count + 1);
  }
}

void DramHashMap::Insert(uint64_t hash, uint32_t slot, bool dirty) {
  STRATA_ASSERT(slot != kDramNoSlot, "DramHashMap::Insert of the empty marker");
  // Grown by 9/8 once more than 7/8 full: the load stays in (0.77, 0.875].
  if (NeedsGrow()) {
    STRATA_ASSERT(owns_, "DramHashMap::Insert past the load bound of its index's segment");
    Grow();
  }
  Place(TagOf(hash), slot, dirty ? 1u : 0u);
  ++size_;
}

uint64_t DramHashMap::FindEntry(uint64_t hash, uint32_t slot) const {
  const uint32_t tag = TagOf(hash);
  uint64_t walked = 0;
  for (uint64_t b = Home(tag);; b = Step(b)) {
    for (uint64_t k = b * kB; k < (b + 1) * kB; ++k) {
      const Entry& e = buckets_[k];
      if (e.slot == slot && slot != kDramNoSlot && ((e.tag_dirty >> 1) & kTagMask) == tag) return k;
    }
    if (CountOf(b) == 0 || ++walked == lines_) return count_;
  }
}

bool DramHashMap::SetDirty(uint64_t hash, uint32_t slot, bool dirty) {
  const uint64_t i = FindEntry(hash, slot);
  if (i == count_) return false;
  buckets_[i].tag_dirty = (buckets_[i].tag_dirty & ~1u) | (dirty ? 1u : 0u);
  return true;
}

bool DramHashMap::Erase(uint64_t hash, uint32_t slot) {
  const uint64_t i = FindEntry(hash, slot);
  if (i == count_) return false;
  // No entry moves: the buckets the entry passed when it was placed (full
  // then, from its home to its own) count one overflowing entry fewer.
  buckets_[i].slot = kDramNoSlot;
  for (uint64_t b = Home(TagOf(hash)); b != i / kB; b = Step(b)) {
    const uint32_t count = CountOf(b);
    STRATA_ASSERT(count > 0, "DramHashMap::Erase: an overflow count below zero");
    if (count < kCountMax) SetCount(b, count - 1);
  }
  --size_;
  return true;
}

bool DramHashMap::Fits(uint64_t more) const {
  return (size_ + more) * kDramIndexLoadDen <= count_ * kDramIndexLoadNum;
}

void DramHashMap::MoveTo(Entry* buckets, uint64_t count) {
  STRATA_ASSERT(count % kB == 0 && count / kB <= (uint64_t{1} << kTagBits),
                "DramHashMap: a stripe outgrew its tag space");
  const Entry* old = buckets_;
  const uint64_t old_count = count_;
  buckets_ = buckets;
  count_ = count;
  lines_ = count / kB;
  for (uint64_t k = 0; k < old_count; ++k) {
    const Entry& e = old[k];
    if (e.slot != kDramNoSlot) Place((e.tag_dirty >> 1) & kTagMask, e.slot, e.tag_dirty & 1);
  }
}

void DramHashMap::Grow() {
  Buckets old = std::move(storage_);
  const uint64_t count = GrownCount(count_);
  storage_ = Allocate(count, huge_pages_);
  MoveTo(storage_.data, count);
}

DramIndex::DramIndex(uint32_t stripes, bool huge_pages)
    : count_(stripes),
      shift_(64 - static_cast<uint32_t>(std::countr_zero(stripes))),
      huge_pages_(huge_pages),
      stripes_(new Stripe[stripes]) {
  STRATA_ASSERT(std::has_single_bit(stripes), "DramIndex stripes must be a power of two");
  base::MutexLock grow_lock(&grow_mu_);  // not shared yet; for the analysis
  buckets_ = DramHashMap::Allocate(uint64_t{stripes} * kInitialBuckets, huge_pages);
  segment_ = kInitialBuckets;
  hint_base_.store(buckets_.data, std::memory_order_relaxed);
  hint_segment_.store(segment_, std::memory_order_relaxed);
  for (uint32_t i = 0; i < stripes; ++i) {
    base::WriterLock lock(&stripes_[i].mu);
    stripes_[i].map = DramHashMap(buckets_.data + uint64_t{i} * segment_, segment_);
  }
}

void DramIndex::Reserve(uint32_t i, uint64_t more) {
  base::MutexLock grow_lock(&grow_mu_);
  uint64_t size = 0;
  {
    base::ReaderLock lock(&stripes_[i].mu);
    if (stripes_[i].map.Fits(more)) return;
    size = stripes_[i].map.size();
  }
  uint64_t segment = GrownCount(segment_);
  while ((size + more) * kDramIndexLoadDen > segment * kDramIndexLoadNum) {
    segment = GrownCount(segment);
  }
  DramHashMap::Buckets grown = DramHashMap::Allocate(uint64_t{count_} * segment, huge_pages_);
  // A stripe not yet moved may gain entries meanwhile, but only up to its
  // load bound in the old segment, which is smaller than the new one.
  for (uint32_t k = 0; k < count_; ++k) {
    base::WriterLock lock(&stripes_[k].mu);
    stripes_[k].map.MoveTo(grown.data + uint64_t{k} * segment, segment);
  }
  // Every stripe has moved under its exclusive lock: no lookup or change
  // reads the old array any more.
  buckets_ = std::move(grown);
  segment_ = segment;
  hint_base_.store(buckets_.data, std::memory_order_relaxed);
  hint_segment_.store(segment_, std::memory_order_relaxed);
}

}  // namespace strata::storage
