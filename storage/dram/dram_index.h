// DramIndex: the key -> slot index of one table of the DRAM cache, split into
// lock stripes. Each stripe is an open-addressing hash map of 8-byte entries
// (linear probing, backward-shift deletion, so no tombstones) guarded by a
// reader-writer lock.
//
// An entry holds the slot, a 31-bit tag of the key's hash and the row's dirty
// flag; the key itself lives in the row's slot header (DramSlotHeader), which
// a hit reads anyway, so the index costs 8 bytes per bucket. The tag also
// gives an entry's home bucket (a multiply-shift of the tag onto the bucket
// count), so growth and deletion never read keys. Bucket counts are not
// powers of two: a map grows by 5/4 once more than 7/8 of it is full, which
// keeps the load between 0.7 and 0.875 (9.1 to 11.5 bytes per key).
//
// Every 64-bit key is valid: emptiness is marked in the slot field (value
// kDramNoSlot), never in the key. Keys are mixed with a 64-bit finaliser; the
// top bits pick the stripe, the low 32 the tag.
//
// Thread safety: DramHashMap is not thread-safe; DramIndex hands out stripes
// whose `mu` the caller takes (shared to read, exclusive to change the map).
// Ownership: values; the maps own their buckets.
#pragma once

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
  // Bucket arrays of 2 MiB and more live in a DramArena (interleaved, huge
  // pages when `huge_pages`), so probes of a large map rarely miss the TLB.
  explicit DramHashMap(bool huge_pages = false);

  // A probe: the bucket it is at and the tag it looks for.
  struct Probe {
    uint64_t at;
    uint32_t tag;
  };
  Probe Start(uint64_t hash) const {
    const uint32_t tag = TagOf(hash);
    return {Home(tag), tag};
  }
  // The slot of the next entry with the probe's tag at or after p->at (p->at
  // moves past it), or kDramNoSlot at the first empty bucket; *dirty is its
  // dirty flag. A tag match is a candidate: the caller compares the key.
  uint32_t Next(Probe* p, bool* dirty) const {
    for (;; p->at = Step(p->at)) {
      const Entry& e = buckets_[p->at];
      if (e.slot == kDramNoSlot) return kDramNoSlot;
      if ((e.tag_dirty >> 1) == p->tag) {
        *dirty = (e.tag_dirty & 1) != 0;
        p->at = Step(p->at);
        return e.slot;
      }
    }
  }
  // The slot of `key`, or kDramNoSlot; key_at(slot) is the key slot holds.
  template <typename KeyAt>
  uint32_t Find(Key key, uint64_t hash, const KeyAt& key_at, bool* dirty) const {
    Probe p = Start(hash);
    while (true) {
      const uint32_t slot = Next(&p, dirty);
      if (slot == kDramNoSlot || key_at(slot) == key) return slot;
    }
  }
  // The home bucket's line. (Prefetching the next line too, where a probe
  // run at high load often ends, made lookups slower: more lines in flight
  // for the row copies to wait behind.)
  void Prefetch(uint64_t hash) const { __builtin_prefetch(&buckets_[Home(TagOf(hash))]); }
  // REQUIRES: the key of `hash` absent, slot != kDramNoSlot.
  void Insert(uint64_t hash, uint32_t slot, bool dirty);
  // Removes the entry of `slot` (whose key has `hash`); false when absent.
  bool Erase(uint64_t hash, uint32_t slot);
  // Sets the dirty flag of the entry of `slot`; false when absent.
  bool SetDirty(uint64_t hash, uint32_t slot, bool dirty);

  uint64_t size() const { return size_; }
  uint64_t bytes() const { return buckets_count_ * sizeof(Entry); }

 private:
  struct Entry {
    uint32_t slot;
    uint32_t tag_dirty;  // tag << 1 | dirty
  };
  static_assert(sizeof(Entry) == 8);
  struct Buckets {  // a vector when small, a huge-page arena when large
    std::vector<Entry> small;
    std::unique_ptr<DramArena> large;
    Entry* data = nullptr;
  };
  static uint32_t TagOf(uint64_t hash) { return static_cast<uint32_t>(hash) >> 1; }
  uint64_t Home(uint32_t tag) const { return (uint64_t{tag} * buckets_count_) >> 31; }
  uint64_t Step(uint64_t at) const { return at + 1 == buckets_count_ ? 0 : at + 1; }
  uint64_t FindEntry(uint64_t hash, uint32_t slot) const;  // bucket, or buckets_count_
  Buckets Allocate(uint64_t n) const;                      // n empty buckets
  void Grow();

  bool huge_pages_;
  Buckets storage_;
  Entry* buckets_;  // storage_.data
  uint64_t buckets_count_;
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

  uint32_t StripeOf(uint64_t hash) const {
    return shift_ >= 64 ? 0 : static_cast<uint32_t>(hash >> shift_);
  }
  Stripe& stripe(uint32_t i) { return stripes_[i]; }
  const Stripe& stripe(uint32_t i) const { return stripes_[i]; }
  uint32_t stripes() const { return count_; }
  // Bucket bytes over all stripes (takes each stripe's lock shared).
  uint64_t bytes() const;

 private:
  const uint32_t count_;
  const uint32_t shift_;  // 64 - log2(count_)
  std::unique_ptr<Stripe[]> stripes_;
};

}  // namespace strata::storage
