// DramIndex: the key -> slot index of one table of the DRAM cache, split into
// lock stripes. Each stripe is an open-addressing hash map of 8-byte entries
// in buckets of one cache line (8 entries; linear probing over buckets)
// guarded by a reader-writer lock. A probe reads its home bucket's line
// whole: a key's entry is there unless the bucket overflowed into the next.
// Each bucket keeps an overflow count (8 bits, one in each entry): how many
// entries that passed it because it was full live beyond it. A probe goes on
// to the next bucket only while that count is above 0, so a probe for an
// absent key ends at the first bucket no entry passed, often its home, even
// when that bucket is full; an insert takes the first free entry at or after
// its home and counts the full buckets it passes; an erase empties the entry
// (no entry moves, no tombstone) and uncounts them. A count that reaches 255
// stays there (probes past it go on, as they must).
//
// An entry holds the slot, a 30-bit tag of the key's hash, the row's dirty
// flag and one bit of its bucket's overflow count; the key itself lives in
// the row's slot header (DramSlotHeader), which
// a hit reads anyway, so the index costs 8 bytes per entry. The tag also
// gives an entry's home bucket (a multiply-shift of the tag onto the bucket
// count), so growth and deletion never read keys. Bucket counts are not
// powers of two: a map grows by 9/8 once more than 7/8 of it is full, which
// keeps the load between 0.77 and 0.875 (9.1 to 10.3 bytes per key).
//
// Every 64-bit key is valid: emptiness is marked in the slot field (value
// kDramNoSlot), never in the key. Keys are mixed with a 64-bit finaliser; the
// top bits pick the stripe, bits 31..2 the tag.
//
// A DramIndex keeps the buckets of all its stripes in one array (a DramArena
// on huge pages once it reaches 2 MiB), each stripe a segment of equal size,
// all grown together by 9/8 when one would pass 7/8 full: a table's index is
// one huge-page mapping, so probes of a large index rarely miss the TLB (an
// array per stripe stayed below the 2 MiB huge-page threshold, on 4 KiB
// pages, until a table held about 13M rows at 64 stripes).
//
// Thread safety: DramHashMap is not thread-safe; DramIndex hands out stripes
// whose `mu` the caller takes (shared to read, exclusive to change the map).
// Growth (DramIndex::Reserve, one grower at a time under grow_mu_) moves one
// stripe at a time under its exclusive lock, so several threads may change
// different stripes, or grow the index, at once. Ownership: a standalone DramHashMap owns its
// buckets; the maps of a DramIndex use segments of the index's array.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/hash.h"
#include "base/mutex.h"
#include "storage/dram/dram_arena.h"
#include "strata/types.h"

namespace strata::storage {

inline constexpr uint32_t kDramNoSlot = UINT32_MAX;

// The murmur3 64-bit finaliser: spreads sequential keys over all bits.
inline uint64_t DramKeyHash(Key key) { return MixMurmur64(key); }

class DramHashMap {
 public:
  struct Entry {
    uint32_t slot;
    // Bit 31: one bit of the bucket's overflow count (entry k holds bit k,
    // free entries too); bits 30..1: the tag; bit 0: the dirty flag.
    uint32_t tag_dirty;
  };
  static_assert(sizeof(Entry) == 8);
  // Entries per bucket: a bucket is one 64-byte cache line.
  static constexpr uint32_t kBucketEntries = 8;
  static constexpr uint32_t kTagBits = 30;
  static constexpr uint32_t kTagMask = (1u << kTagBits) - 1;
  static constexpr uint32_t kCountBit = 1u << 31;
  static constexpr uint32_t kTagBitsMask = kTagMask << 1;  // the tag in place
  // A bucket's overflow count: how many entries whose probe passed it (it
  // was full when they were placed) live beyond it. Saturated counts stay.
  static constexpr uint32_t kCountMax = (1u << kBucketEntries) - 1;
  // Entries: a vector when small, an arena of 2 MiB and more (interleaved,
  // huge pages when `huge_pages`) when large, every entry empty, `data`
  // aligned to a cache line.
  struct Buckets {
    std::vector<Entry> small;
    std::unique_ptr<DramArena> large;
    Entry* data = nullptr;
  };
  // REQUIRES: n a multiple of kBucketEntries.
  static Buckets Allocate(uint64_t n, bool huge_pages);
  // The tag of a key's hash, and its home bucket in a map of `lines` buckets.
  static uint32_t TagOf(uint64_t hash) { return static_cast<uint32_t>(hash) >> 2; }
  static uint64_t HomeIn(uint32_t tag, uint64_t lines) {
    return (uint64_t{tag} * lines) >> kTagBits;
  }

  // A map that owns its entries and grows them itself.
  explicit DramHashMap(bool huge_pages = false);
  // A map on `count` empty entries at `buckets` (cache-line aligned, count a
  // multiple of kBucketEntries) owned by its caller (a DramIndex), which
  // grows it with NeedsGrow and MoveTo.
  DramHashMap(Entry* buckets, uint64_t count);

  // A probe: the bucket it is at, the entry of that bucket it looks at next
  // (kBucketEntries: the bucket is done), the tag it looks for and the
  // buckets it has left behind.
  struct Probe {
    uint64_t bucket;
    uint32_t next;
    uint32_t tag;
    uint64_t walked = 0;
  };
  Probe Start(uint64_t hash) const {
    const uint32_t tag = TagOf(hash);
    return {Home(tag), 0, tag};
  }
  // The slot of the next entry with the probe's tag at or after the probe's
  // position (the probe moves past it), or kDramNoSlot once a bucket whose
  // overflow count is 0 has been searched (no entry that passed it lives
  // further on) or every bucket has; *dirty is its dirty flag. A tag match
  // is a candidate: the caller compares the key.
  uint32_t Next(Probe* p, bool* dirty) const {
    while (true) {
      const Entry* b = buckets_ + p->bucket * kBucketEntries;
      const uint32_t want = p->tag << 1;
      uint32_t match = 0;
      for (uint32_t k = 0; k < kBucketEntries; ++k) {
        match |= uint32_t{b[k].slot != kDramNoSlot && (b[k].tag_dirty & kTagBitsMask) == want} << k;
      }
      match &= ~0u << p->next;
      if (match != 0) {
        const uint32_t k = static_cast<uint32_t>(__builtin_ctz(match));
        *dirty = (b[k].tag_dirty & 1) != 0;
        p->next = k + 1;
        return b[k].slot;
      }
      // The count only when the bucket holds no candidate (a hit's path
      // reads no more than the tags).
      uint32_t count = 0;
      for (uint32_t k = 0; k < kBucketEntries; ++k) count |= (b[k].tag_dirty >> 31) << k;
      if (count == 0 || ++p->walked == lines_) return kDramNoSlot;
      p->bucket = Step(p->bucket);
      p->next = 0;
    }
  }
  // The slot of `key`, or kDramNoSlot; key_at(slot) is the key slot holds.
  // *past_home (when given): how many buckets past the key's home bucket
  // its entry is, or, for an absent key, the first bucket with a free entry
  // (where Insert will put it) among those the probe read, or the one after
  // them.
  template <typename KeyAt>
  uint32_t Find(Key key, uint64_t hash, const KeyAt& key_at, bool* dirty,
                uint64_t* past_home = nullptr) const {
    Probe p = Start(hash);
    while (true) {
      const uint32_t slot = Next(&p, dirty);
      if (slot != kDramNoSlot && key_at(slot) != key) continue;
      if (past_home != nullptr) {
        *past_home = p.walked;
        if (slot == kDramNoSlot) {
          // The buckets read are in cache: the first with a free entry.
          const uint64_t home = Home(p.tag);
          *past_home = p.walked + 1;
          for (uint64_t d = 0, b = home; d <= p.walked; ++d, b = Step(b)) {
            if (FreeIn(b) != kBucketEntries) {
              *past_home = d;
              break;
            }
          }
        }
      }
      return slot;
    }
  }
  // The home bucket's line, which holds the key's entry unless the bucket
  // overflowed.
  [[gnu::always_inline]] void Prefetch(uint64_t hash) const { PrefetchAt(Start(hash)); }
  [[gnu::always_inline]] void PrefetchAt(const Probe& p) const {
    __builtin_prefetch(buckets_ + p.bucket * kBucketEntries);
  }
  // For a probe whose first `lines` buckets from its home have arrived in
  // cache: when the overflow counts of all of them are above 0 (the probe
  // of an absent key goes on past them), prefetches the `lines` after them.
  [[gnu::always_inline]] void PrefetchRunOn(uint64_t hash, uint32_t lines) const {
    uint64_t b = Home(TagOf(hash));
    for (uint32_t l = 0; l < lines; ++l, b = Step(b)) {
      const Entry* e = buckets_ + b * kBucketEntries;
      uint32_t over = 0;
      for (uint32_t k = 0; k < kBucketEntries; ++k) over |= e[k].tag_dirty;
      if ((over & kCountBit) == 0) return;
    }
    for (uint32_t l = 0; l < lines; ++l, b = Step(b)) {
      __builtin_prefetch(buckets_ + b * kBucketEntries);
    }
  }
  // REQUIRES: the key of `hash` absent, slot != kDramNoSlot; for a map on
  // its caller's entries, !NeedsGrow().
  void Insert(uint64_t hash, uint32_t slot, bool dirty);
  // True when `more` more entries keep the load within its bound (7/8).
  bool Fits(uint64_t more) const;
  // True when one more entry would pass the load bound.
  bool NeedsGrow() const { return !Fits(1); }
  // Moves the entries into `count` empty entries at `buckets` (owned by the
  // caller from now on; aligned, a multiple of kBucketEntries) and forgets
  // the old ones.
  void MoveTo(Entry* buckets, uint64_t count);
  uint64_t buckets_count() const { return count_; }  // entries, free or not
  // Removes the entry of `slot` (whose key has `hash`); false when absent.
  bool Erase(uint64_t hash, uint32_t slot);
  // Sets the dirty flag of the entry of `slot`; false when absent.
  bool SetDirty(uint64_t hash, uint32_t slot, bool dirty);

  uint64_t size() const { return size_; }
  uint64_t bytes() const { return count_ * sizeof(Entry); }

 private:
  // The home bucket of a tag: a multiply-shift onto the bucket count.
  uint64_t Home(uint32_t tag) const { return HomeIn(tag, lines_); }
  uint64_t Step(uint64_t bucket) const { return bucket + 1 == lines_ ? 0 : bucket + 1; }
  // The first free entry of bucket `b` (0..7), or kBucketEntries.
  uint32_t FreeIn(uint64_t b) const {
    const Entry* e = buckets_ + b * kBucketEntries;
    for (uint32_t k = 0; k < kBucketEntries; ++k) {
      if (e[k].slot == kDramNoSlot) return k;
    }
    return kBucketEntries;
  }
  uint32_t CountOf(uint64_t b) const;
  void SetCount(uint64_t b, uint32_t count);
  // Puts an entry into the first free entry at or after the home bucket of
  // `tag`, counting the full buckets it passes.
  void Place(uint32_t tag, uint32_t slot, uint32_t dirty);
  uint64_t FindEntry(uint64_t hash, uint32_t slot) const;  // entry, or count_
  void Grow();                                             // own entries only

  bool huge_pages_ = false;
  bool owns_ = true;  // storage_ holds the entries (else a DramIndex does)
  Buckets storage_;
  Entry* buckets_;  // storage_.data
  uint64_t count_;  // entries
  uint64_t lines_;  // buckets: count_ / kBucketEntries
  uint64_t size_ = 0;
};

class DramIndex {
 public:
  struct alignas(64) Stripe {
    mutable base::SharedMutex mu;
    DramHashMap map GUARDED_BY(mu);
  };

  // REQUIRES: stripes is a power of two >= 1.
  DramIndex(uint32_t stripes, bool huge_pages);

  // Makes room for `more` more entries in stripe `i`: while they would pass
  // its load bound, every stripe moves to segments 9/8 the size (as many
  // steps as needed) in a new array, one stripe at a time under its
  // exclusive lock (lookups and changes of the others go on). Thread-safe;
  // REQUIRES: the caller holds no stripe lock. Another thread may take the
  // room before the caller locks the stripe: check Fits under the lock and
  // call again when it fails.
  void Reserve(uint32_t i, uint64_t more) EXCLUDES(grow_mu_);
  uint32_t StripeOf(uint64_t hash) const {
    return shift_ >= 64 ? 0 : static_cast<uint32_t>(hash >> shift_);
  }
  // Prefetches the line `skip` buckets past the home bucket of the key of
  // `hash` and the `lines - 1` after it (for writing when `write`) without a
  // stripe lock:
  // the address comes from a copy of the array's base and segment size that
  // growth updates, so during a growth it may be stale, which costs a
  // useless prefetch (a prefetch never faults), never a wrong access.
  [[gnu::always_inline]] void PrefetchHint(uint64_t hash, uint32_t lines, bool write,
                                           uint64_t skip = 0) const {
    const auto* base = hint_base_.load(std::memory_order_relaxed);
    const uint64_t segment = hint_segment_.load(std::memory_order_relaxed);
    const uint64_t entries = DramHashMap::kBucketEntries;
    const uint64_t lines_in = segment / entries;
    if (lines_in == 0) return;
    const auto* stripe = base + StripeOf(hash) * segment;
    const uint64_t home = DramHashMap::HomeIn(DramHashMap::TagOf(hash), lines_in);
    for (uint64_t l = skip; l < skip + lines; ++l) {
      uint64_t b = home + l;
      if (b >= lines_in) b %= lines_in;  // wraps round as the probe does
      const auto* at = stripe + b * entries;
      if (write) {
        __builtin_prefetch(at, 1);
      } else {
        __builtin_prefetch(at);
      }
    }
  }
  Stripe& stripe(uint32_t i) { return stripes_[i]; }
  const Stripe& stripe(uint32_t i) const { return stripes_[i]; }
  uint32_t stripes() const { return count_; }
  // Bucket bytes of the array and the stripes' headers.
  uint64_t bytes() const EXCLUDES(grow_mu_) {
    base::MutexLock lock(&grow_mu_);
    return sizeof(Stripe) * count_ + count_ * segment_ * 8;
  }

 private:
  const uint32_t count_;
  const uint32_t shift_;  // 64 - log2(count_)
  const bool huge_pages_;
  std::unique_ptr<Stripe[]> stripes_;
  // Every stripe's buckets: stripe i at [i * segment_, (i + 1) * segment_).
  // Changed by Reserve only, one grower at a time.
  mutable base::Mutex grow_mu_;
  DramHashMap::Buckets buckets_ GUARDED_BY(grow_mu_);
  uint64_t segment_ GUARDED_BY(grow_mu_) = 0;
  // Copies of buckets_.data and segment_ for PrefetchHint.
  std::atomic<const DramHashMap::Entry*> hint_base_{nullptr};
  std::atomic<uint64_t> hint_segment_{0};
};

}  // namespace strata::storage
