// DramIndex: the key -> slot index of one table of the DRAM cache, split into
// lock stripes. Each stripe is a bucketized cuckoo hash map of 8-byte entries
// in buckets of one cache line (8 entries) guarded by a reader-writer lock.
// A key has two candidate buckets in one group of 64 buckets (4 KiB, one
// page): its home, chosen by its tag, and its alternative, the home XOR a
// nonzero offset taken from the tag's low bits inside the group. So the
// other bucket of any entry follows from its bucket and its tag alone (the
// XOR is its own inverse): growth, erase and cuckoo moves never read keys.
// A probe reads the two lines (one page: one TLB miss), whole, 8 tag
// compares each. An insert takes a free entry of the home, else of the
// alternative; when both are full it moves an entry of one of them to its
// other bucket (one with room if any of the 16 has one, else a bounded
// chain of kicks). An entry left over after kDramIndexCuckooStepsMax kicks
// goes to the stripe's stash (a short array the map keeps, almost always
// empty), and its home bucket's stash count (8 bits, one in each entry)
// goes up: a probe searches the stash only when its home's count is above 0.
// An erase empties one entry and pulls a stashed entry that may live there
// back in. A count that reaches 255 stays there (probes search the stash,
// as they must).
//
// An entry holds the slot, a 30-bit tag of the key's hash, the row's dirty
// flag and one bit of its bucket's stash count; the key itself lives in the
// row's slot header (DramSlotHeader), which a hit reads anyway, so the index
// costs 8 bytes per entry. Bucket counts are powers of two below one group
// and whole groups above: a map grows by 9/8 (rounded up to whole groups)
// once more than 7/8 of it is full, which keeps the load between 0.77 and
// 0.875 (9.1 to 10.3 bytes per key) at the sizes that matter.
//
// Every 64-bit key is valid: emptiness is marked in the slot field (value
// kDramNoSlot), never in the key. Keys are mixed with a 64-bit finaliser; the
// top bits pick the stripe, bits 31..2 the tag.
//
// A DramIndex keeps the buckets of all its stripes in one array (a DramArena
// on huge pages once it reaches 2 MiB), each stripe a segment of equal size
// (whole 4 KiB groups, so a group is one page of the 2 MiB-aligned array),
// all grown together by 9/8 when one would pass 7/8 full.
//
// Thread safety: DramHashMap is not thread-safe; DramIndex hands out stripes
// whose `mu` the caller takes (shared to read, exclusive to change the map),
// or reads a stripe optimistically: under arrays_mu() shared, checking the
// stripe's sequence count (base::SeqSharedMutex) around its reads.
// Growth (DramIndex::Reserve, one grower at a time under grow_mu_) moves one
// stripe at a time under its exclusive lock, with arrays_mu() held
// exclusively, so several threads may change different stripes, or grow the
// index, at once, while optimistic readers wait. Ownership: a standalone DramHashMap owns its
// buckets; the maps of a DramIndex use segments of the index's array. Each
// map owns its stash.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/hash.h"
#include "base/mutex.h"
#include "storage/dram/dram_arena.h"
#include "storage/dram/limits.h"
#include "strata/types.h"

namespace strata::storage {

inline constexpr uint32_t kDramNoSlot = UINT32_MAX;

// The murmur3 64-bit finaliser: spreads sequential keys over all bits.
inline uint64_t DramKeyHash(Key key) { return MixMurmur64(key); }

class DramHashMap {
 public:
  struct Entry {
    uint32_t slot;
    // Bit 31: one bit of the bucket's stash count (entry k holds bit k,
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
  // A bucket's stash count: how many stashed entries have it as home.
  // Saturated counts stay.
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
  // True when a map may have `lines` buckets: a power of two below one
  // group, whole groups above.
  static bool ValidLines(uint64_t lines);
  // The tag of a key's hash, and its home bucket in a map of `lines` buckets.
  static uint32_t TagOf(uint64_t hash) { return static_cast<uint32_t>(hash) >> 2; }
  static uint64_t HomeIn(uint32_t tag, uint64_t lines) {
    return (uint64_t{tag} * lines) >> kTagBits;
  }
  // The other candidate bucket of an entry with `tag` in bucket `b`: b XOR
  // a nonzero offset from the tag's low bits, inside b's group (b itself
  // in a map of one bucket). AltIn(AltIn(b, t), t) == b.
  static uint64_t AltIn(uint64_t b, uint32_t tag, uint64_t lines) {
    const uint64_t mask = (lines < kDramIndexGroupBuckets ? lines : kDramIndexGroupBuckets) - 1;
    const uint64_t d = tag & mask;
    return b ^ (d == 0 ? mask : d);
  }

  // Bit k set when entry k of the bucket at `b` is in use (slot !=
  // kDramNoSlot) and has the tag of `want` (TagOf(hash) << 1): a probe's
  // scan of a whole line. With SSE2, about 20 vector instructions
  // for the 8 entries instead of 8 scalar tests; scans that stop at their
  // first hit (FreeIn, FindEntry) stay scalar, which is shorter for them.
  static uint32_t MatchMask(const Entry* b, uint32_t want) {
#if defined(__SSE2__)
    const __m128i none = _mm_set1_epi32(-1);  // kDramNoSlot
    const __m128i tag_bits = _mm_set1_epi32(static_cast<int>(kTagBitsMask));
    const __m128i want4 = _mm_set1_epi32(static_cast<int>(want));
    auto half = [&](const Entry* e) {
      const __m128 lo = _mm_loadu_ps(reinterpret_cast<const float*>(e));      // entries 0, 1
      const __m128 hi = _mm_loadu_ps(reinterpret_cast<const float*>(e + 2));  // entries 2, 3
      const __m128i slots = _mm_castps_si128(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
      const __m128i tags = _mm_castps_si128(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
      const __m128i hit = _mm_andnot_si128(_mm_cmpeq_epi32(slots, none),
                                           _mm_cmpeq_epi32(_mm_and_si128(tags, tag_bits), want4));
      return static_cast<uint32_t>(_mm_movemask_ps(_mm_castsi128_ps(hit)));
    };
    return half(b) | half(b + 4) << 4;
#else
    uint32_t match = 0;
    for (uint32_t k = 0; k < kBucketEntries; ++k) {
      match |= uint32_t{b[k].slot != kDramNoSlot && (b[k].tag_dirty & kTagBitsMask) == want} << k;
    }
    return match;
#endif
  }

  // The stash count of the bucket at `b`: how many stashed entries have it
  // as home (kCountMax: that many or more).
  static uint32_t CountIn(const Entry* b) {
    uint32_t count = 0;
    for (uint32_t k = 0; k < kBucketEntries; ++k) count |= (b[k].tag_dirty >> 31) << k;
    return count;
  }

  // A key's two candidate lines, for a probe that scans them itself (the
  // lookup's pipeline): its home, and the other line of an entry of `tag`
  // in `line` (the home again in a map of one bucket).
  const Entry* HomeLine(uint32_t tag) const { return buckets_ + Home(tag) * kBucketEntries; }
  const Entry* OtherLine(const Entry* line, uint32_t tag) const {
    const auto b = static_cast<uint64_t>(line - buckets_) / kBucketEntries;
    return buckets_ + Alt(b, tag) * kBucketEntries;
  }

  // A map that owns its entries and grows them itself.
  explicit DramHashMap(bool huge_pages = false);
  // A map on `count` empty entries at `buckets` (cache-line aligned,
  // ValidLines(count / kBucketEntries)) owned by its caller (a DramIndex),
  // which grows it with NeedsGrow and MoveTo.
  DramHashMap(Entry* buckets, uint64_t count);

  // The slot of `key`, or kDramNoSlot; key_at(slot) is the key slot holds.
  // The candidates in order: the home line's tag matches, the other line's
  // (not in a map of one bucket), then the stash's when the home's stash
  // count is above 0; each line scanned once by MatchMask. A tag match is a
  // candidate until key_at(slot) == key.
  template <typename KeyAt>
  uint32_t Find(Key key, uint64_t hash, const KeyAt& key_at, bool* dirty) const {
    const uint32_t tag = TagOf(hash);
    const uint32_t want = tag << 1;
    const uint64_t home = Home(tag);
    const uint64_t alt = Alt(home, tag);
    for (uint64_t b = home;; b = alt) {
      const Entry* e = buckets_ + b * kBucketEntries;
      for (uint32_t match = MatchMask(e, want); match != 0; match &= match - 1) {
        const Entry& x = e[__builtin_ctz(match)];
        if (key_at(x.slot) == key) {
          *dirty = (x.tag_dirty & 1) != 0;
          return x.slot;
        }
      }
      if (b == alt) break;
    }
    if (!stash_.empty() && CountOf(home) != 0) {
      for (const Entry& x : stash_) {
        if ((x.tag_dirty & kTagBitsMask) == want && key_at(x.slot) == key) {
          *dirty = (x.tag_dirty & 1) != 0;
          return x.slot;
        }
      }
    }
    return kDramNoSlot;
  }
  // REQUIRES: the key of `hash` absent, slot != kDramNoSlot; for a map on
  // its caller's entries, !NeedsGrow().
  void Insert(uint64_t hash, uint32_t slot, bool dirty);
  // True when `more` more entries keep the load within its bound (7/8).
  bool Fits(uint64_t more) const {
    return (size_ + more) * kDramIndexLoadDen <= count_ * kDramIndexLoadNum;
  }
  // True when one more entry would pass the load bound.
  bool NeedsGrow() const { return !Fits(1); }
  // Moves the entries (stash included) into `count` empty entries at
  // `buckets` (owned by the caller from now on; aligned,
  // ValidLines(count / kBucketEntries)) and forgets the old ones.
  void MoveTo(Entry* buckets, uint64_t count);
  uint64_t buckets_count() const { return count_; }  // entries, free or not
  // Removes the entry of `slot` (whose key has `hash`); false when absent.
  bool Erase(uint64_t hash, uint32_t slot);
  // Sets the dirty flag of the entry of `slot`; false when absent.
  bool SetDirty(uint64_t hash, uint32_t slot, bool dirty);

  uint64_t size() const { return size_; }
  uint64_t stash_size() const { return stash_.size(); }
  // The stash count of the home bucket of the key of `hash`.
  uint32_t StashCountAt(uint64_t hash) const { return CountOf(Home(TagOf(hash))); }
  // Buckets and stash.
  uint64_t bytes() const { return count_ * sizeof(Entry) + stash_bytes(); }
  uint64_t stash_bytes() const { return stash_.capacity() * sizeof(Entry); }

 private:
  // The home bucket of a tag: a multiply-shift onto the bucket count.
  uint64_t Home(uint32_t tag) const { return HomeIn(tag, lines_); }
  uint64_t Alt(uint64_t b, uint32_t tag) const { return AltIn(b, tag, lines_); }
  static uint32_t TagField(const Entry& e) { return (e.tag_dirty >> 1) & kTagMask; }
  // The first free entry of bucket `b` (0..7), or kBucketEntries.
  uint32_t FreeIn(uint64_t b) const {
    const Entry* e = buckets_ + b * kBucketEntries;
    for (uint32_t k = 0; k < kBucketEntries; ++k) {
      if (e[k].slot == kDramNoSlot) return k;
    }
    return kBucketEntries;
  }
  // Writes entry k of bucket b (its stash count bit stays).
  void Put(uint64_t b, uint32_t k, Entry e) {
    Entry& at = buckets_[b * kBucketEntries + k];
    at.slot = e.slot;
    at.tag_dirty = (at.tag_dirty & kCountBit) | (e.tag_dirty & ~kCountBit);
  }
  uint32_t CountOf(uint64_t b) const { return CountIn(buckets_ + b * kBucketEntries); }
  void SetCount(uint64_t b, uint32_t count);
  // Moves one entry of full bucket `b` to its other bucket when that has
  // room; the entry of b freed (0..7), or kBucketEntries.
  uint32_t MoveOneOut(uint64_t b);
  // Puts an entry into one of its candidate buckets (cuckoo moves when both
  // are full), or into the stash.
  void Place(Entry e);
  // Stashes an entry, counting it at its home.
  void Stash(Entry e);
  // Moves a stashed entry whose candidates include bucket `b` (which has a
  // free entry) into it, if there is one.
  void Unstash(uint64_t b);
  Entry* FindEntry(uint64_t hash, uint32_t slot);  // or nullptr
  void Grow();                                     // own entries only

  bool huge_pages_ = false;
  bool owns_ = true;  // storage_ holds the entries (else a DramIndex does)
  Buckets storage_;
  Entry* buckets_;  // storage_.data
  uint64_t count_;  // entries
  uint64_t lines_;  // buckets: count_ / kBucketEntries
  uint64_t size_ = 0;
  // Entries whose cuckoo moves failed; the stash counts of their homes
  // say which probes search it.
  std::vector<Entry> stash_;
};

class DramIndex {
 public:
  // Changes to a stripe's map, and to the rows its entries point to while
  // they do, are made under `mu` held exclusively, which moves its
  // sequence count: an optimistic lookup (dram_lookup.h) reads the map and
  // the row without the lock and checks the count before and after.
  struct alignas(64) Stripe {
    mutable base::SeqSharedMutex mu;
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
  // Prefetches the two candidate lines of the key of `hash` (for writing
  // when `write`) without a stripe lock: the address comes from a copy of
  // the array's base and segment size that growth updates, so during a
  // growth it may be stale, which costs a useless prefetch (a prefetch
  // never faults), never a wrong access.
  [[gnu::always_inline]] void PrefetchHint(uint64_t hash, bool write) const {
    const auto* base = hint_base_.load(std::memory_order_relaxed);
    const uint64_t segment = hint_segment_.load(std::memory_order_relaxed);
    const uint64_t entries = DramHashMap::kBucketEntries;
    const uint64_t lines_in = segment / entries;
    if (lines_in == 0) return;
    const auto* stripe = base + StripeOf(hash) * segment;
    const uint32_t tag = DramHashMap::TagOf(hash);
    const uint64_t home = DramHashMap::HomeIn(tag, lines_in);
    const uint64_t alt = DramHashMap::AltIn(home, tag, lines_in);
    if (write) {
      __builtin_prefetch(stripe + home * entries, 1);
      __builtin_prefetch(stripe + alt * entries, 1);
    } else {
      __builtin_prefetch(stripe + home * entries);
      __builtin_prefetch(stripe + alt * entries);
    }
  }
  // Held shared by an optimistic lookup for its whole batch (it reads the
  // stripes' maps without their locks) and exclusively by a growth while it
  // moves the stripes and frees the old array: a growth waits for the
  // lookups in flight, and the lookups of this index wait for it.
  base::RwLock& arrays_mu() const RETURN_CAPABILITY(arrays_mu_) { return arrays_mu_; }
  // Where the stripes' buckets are: stripe i's at base + i * segment, each
  // `segment` entries (segment / kBucketEntries lines). Stable while
  // arrays_mu() is held, shared or not; a stripe's map reads the same.
  struct Layout {
    const DramHashMap::Entry* base;
    uint64_t segment;
  };
  Layout layout() const {
    return {hint_base_.load(std::memory_order_relaxed),
            hint_segment_.load(std::memory_order_relaxed)};
  }
  // StripeOf(hash) == (hash >> (stripe_shift() & 63)) & (stripes() - 1).
  uint32_t stripe_shift() const { return shift_; }
  Stripe& stripe(uint32_t i) { return stripes_[i]; }
  const Stripe& stripe(uint32_t i) const { return stripes_[i]; }
  uint32_t stripes() const { return count_; }
  // Bucket bytes of the array, the stripes' headers and their stashes
  // (whose sizes it reads under each stripe's read lock).
  uint64_t bytes() const EXCLUDES(grow_mu_);

 private:
  const uint32_t count_;
  const uint32_t shift_;  // 64 - log2(count_)
  const bool huge_pages_;
  std::unique_ptr<Stripe[]> stripes_;
  // Every stripe's buckets: stripe i at [i * segment_, (i + 1) * segment_).
  // Changed by Reserve only, one grower at a time.
  mutable base::Mutex grow_mu_;
  mutable base::RwLock arrays_mu_;  // see arrays_mu(); after grow_mu_
  DramHashMap::Buckets buckets_ GUARDED_BY(grow_mu_);
  uint64_t segment_ GUARDED_BY(grow_mu_) = 0;
  // Copies of buckets_.data and segment_ for PrefetchHint.
  std::atomic<const DramHashMap::Entry*> hint_base_{nullptr};
  std::atomic<uint64_t> hint_segment_{0};
};

}  // namespace strata::storage
