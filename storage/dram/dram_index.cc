#include "storage/dram/dram_index.h"

#include <bit>
#include <mutex>

#include "base/assert.h"
#include "storage/dram/limits.h"

namespace strata::storage {
namespace {
constexpr uint64_t kB = DramHashMap::kBucketEntries;
constexpr uint64_t kInitialBuckets = 2 * kB;
// The next entry count: 9/8 of `count`, rounded up to a power of two of
// buckets below one group, to whole groups above.
uint64_t GrownCount(uint64_t count) {
  uint64_t lines = (count / kB * kDramIndexGrowNum + kDramIndexGrowDen - 1) / kDramIndexGrowDen;
  if (lines < kDramIndexGroupBuckets) {
    lines = std::bit_ceil(lines);
  } else {
    lines = (lines + kDramIndexGroupBuckets - 1) / kDramIndexGroupBuckets * kDramIndexGroupBuckets;
  }
  return lines * kB;
}
}  // namespace

bool DramHashMap::ValidLines(uint64_t lines) {
  return lines > 0 && (lines < kDramIndexGroupBuckets ? std::has_single_bit(lines)
                                                      : lines % kDramIndexGroupBuckets == 0);
}

DramHashMap::DramHashMap(bool huge_pages)
    : huge_pages_(huge_pages),
      storage_(Allocate(kInitialBuckets, huge_pages)),
      buckets_(storage_.data),
      count_(kInitialBuckets),
      lines_(kInitialBuckets / kB) {
  stash_.reserve(kDramIndexStashEntries);
}

DramHashMap::DramHashMap(Entry* buckets, uint64_t count)
    : owns_(false), buckets_(buckets), count_(count), lines_(count / kB) {
  STRATA_ASSERT(count % kB == 0 && ValidLines(count / kB),
                "DramHashMap: entries not whole buckets of a valid count");
  STRATA_ASSERT(reinterpret_cast<uintptr_t>(buckets) % 64 == 0, "DramHashMap: unaligned buckets");
  stash_.reserve(kDramIndexStashEntries);
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

void DramHashMap::SetCount(uint64_t b, uint32_t count) {
  for (uint32_t k = 0; k < kB; ++k) {
    uint32_t& td = buckets_[b * kB + k].tag_dirty;
    td = (td & ~kCountBit) | ((count >> k) & 1) << 31;
  }
}

uint32_t DramHashMap::MoveOneOut(uint64_t b) {
  const Entry* e = buckets_ + b * kB;
  // The 8 other buckets are in b's page: their lines are fetched together.
  for (uint32_t k = 0; k < kB; ++k) __builtin_prefetch(buckets_ + Alt(b, TagField(e[k])) * kB);
  for (uint32_t k = 0; k < kB; ++k) {
    const uint64_t other = Alt(b, TagField(e[k]));
    if (other == b) continue;
    const uint32_t free = FreeIn(other);
    if (free != kBucketEntries) {
      Put(other, free, e[k]);
      return k;
    }
  }
  return kBucketEntries;
}

// Inlined into Insert and MoveTo, its callers (both here).
[[gnu::always_inline]] inline void DramHashMap::Place(Entry e) {
  const uint32_t tag = TagField(e);
  const uint64_t home = Home(tag);
  const uint64_t alt = Alt(home, tag);
  uint32_t k = FreeIn(home);
  if (k != kBucketEntries) return Put(home, k, e);
  k = FreeIn(alt);
  if (k != kBucketEntries) return Put(alt, k, e);
  // Both full: an entry of either whose other bucket has room moves there.
  k = MoveOneOut(home);
  if (k != kBucketEntries) return Put(home, k, e);
  if (alt != home) {
    k = MoveOneOut(alt);
    if (k != kBucketEntries) return Put(alt, k, e);
  }
  // A chain of kicks: e takes the place of an entry of its bucket, which
  // goes on to its other bucket (an entry of rotating position, so that the
  // chain does not send one entry back and forth).
  uint64_t b = home;
  for (uint32_t step = 0; step < kDramIndexCuckooStepsMax; ++step) {
    const uint32_t out = (tag + step) % kBucketEntries;
    Entry& at = buckets_[b * kB + out];
    const Entry kicked{at.slot, at.tag_dirty & ~kCountBit};
    Put(b, out, e);
    e = kicked;
    const uint64_t next = Alt(b, TagField(e));
    if (next == b) break;
    b = next;
    k = FreeIn(b);
    if (k != kBucketEntries) return Put(b, k, e);
    k = MoveOneOut(b);
    if (k != kBucketEntries) return Put(b, k, e);
  }
  Stash(e);
}

void DramHashMap::Stash(Entry e) {
  stash_.push_back(Entry{e.slot, e.tag_dirty & ~kCountBit});
  const uint64_t home = Home(TagField(e));
  const uint32_t count = CountOf(home);
  if (count < kCountMax) SetCount(home, count + 1);
}

void DramHashMap::Unstash(uint64_t b) {
  for (size_t i = 0; i < stash_.size(); ++i) {
    const uint32_t tag = TagField(stash_[i]);
    const uint64_t home = Home(tag);
    if (home != b && Alt(home, tag) != b) continue;
    const uint32_t k = FreeIn(b);
    STRATA_ASSERT(k != kBucketEntries, "DramHashMap::Unstash into a full bucket");
    Put(b, k, stash_[i]);
    stash_[i] = stash_.back();
    stash_.pop_back();
    const uint32_t count = CountOf(home);
    STRATA_ASSERT(count > 0, "DramHashMap: a stash count below zero");
    if (count < kCountMax) SetCount(home, count - 1);
    return;
  }
}

void DramHashMap::Insert(uint64_t hash, uint32_t slot, bool dirty) {
  STRATA_ASSERT(slot != kDramNoSlot, "DramHashMap::Insert of the empty marker");
  // Grown by 9/8 once more than 7/8 full: the load stays in (0.77, 0.875].
  if (NeedsGrow()) {
    STRATA_ASSERT(owns_, "DramHashMap::Insert past the load bound of its index's segment");
    Grow();
  }
  Place(Entry{slot, TagOf(hash) << 1 | (dirty ? 1u : 0u)});
  ++size_;
}

// Inlined into Erase and SetDirty, its callers (both here).
[[gnu::always_inline]] inline DramHashMap::Entry* DramHashMap::FindEntry(uint64_t hash,
                                                                         uint32_t slot) {
  if (slot == kDramNoSlot) return nullptr;
  const uint32_t want = TagOf(hash) << 1;
  const uint64_t home = Home(TagOf(hash));
  for (const uint64_t b : {home, Alt(home, TagOf(hash))}) {
    Entry* e = buckets_ + b * kB;
    for (uint32_t k = 0; k < kB; ++k) {
      if (e[k].slot == slot && (e[k].tag_dirty & kTagBitsMask) == want) return &e[k];
    }
  }
  if (stash_.empty() || CountOf(home) == 0) return nullptr;
  for (Entry& e : stash_) {
    if (e.slot == slot && (e.tag_dirty & kTagBitsMask) == want) return &e;
  }
  return nullptr;
}

bool DramHashMap::SetDirty(uint64_t hash, uint32_t slot, bool dirty) {
  Entry* e = FindEntry(hash, slot);
  if (e == nullptr) return false;
  e->tag_dirty = (e->tag_dirty & ~1u) | (dirty ? 1u : 0u);
  return true;
}

bool DramHashMap::Erase(uint64_t hash, uint32_t slot) {
  Entry* e = FindEntry(hash, slot);
  if (e == nullptr) return false;
  --size_;
  if (e >= buckets_ && e < buckets_ + count_) {
    // No other entry moves, except a stashed one that may live here.
    e->slot = kDramNoSlot;
    e->tag_dirty &= kCountBit;
    if (!stash_.empty()) Unstash(static_cast<uint64_t>(e - buckets_) / kB);
    return true;
  }
  const uint64_t home = Home(TagOf(hash));
  *e = stash_.back();
  stash_.pop_back();
  const uint32_t count = CountOf(home);
  STRATA_ASSERT(count > 0, "DramHashMap::Erase: a stash count below zero");
  if (count < kCountMax) SetCount(home, count - 1);
  return true;
}

void DramHashMap::MoveTo(Entry* buckets, uint64_t count) {
  STRATA_ASSERT(
      count % kB == 0 && ValidLines(count / kB) && count / kB <= (uint64_t{1} << kTagBits),
      "DramHashMap: a stripe outgrew its tag space");
  const Entry* old = buckets_;
  const uint64_t old_count = count_;
  std::vector<Entry> old_stash;
  old_stash.reserve(kDramIndexStashEntries);
  old_stash.swap(stash_);
  buckets_ = buckets;
  count_ = count;
  lines_ = count / kB;
  for (uint64_t k = 0; k < old_count; ++k) {
    if (old[k].slot != kDramNoSlot) Place(old[k]);
  }
  for (const Entry& e : old_stash) Place(e);
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
  // Optimistic lookups read maps without their stripes' locks: none runs
  // while the maps move and the old array goes.
  base::WriterLock arrays_lock(&arrays_mu_);
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

uint64_t DramIndex::bytes() const {
  base::MutexLock lock(&grow_mu_);
  uint64_t stash = 0;
  for (uint32_t i = 0; i < count_; ++i) {
    base::ReaderLock stripe_lock(&stripes_[i].mu);
    stash += stripes_[i].map.stash_bytes();
  }
  return sizeof(Stripe) * count_ + count_ * segment_ * 8 + stash;
}

}  // namespace strata::storage
