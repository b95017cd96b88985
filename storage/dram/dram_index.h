// DramIndex: the key -> slot index of one table of the DRAM cache, split into
// lock stripes. Each stripe is an open-addressing hash map (linear probing,
// backward-shift deletion, so no tombstones) guarded by a reader-writer lock.
//
// Every 64-bit key is valid: emptiness is marked in the slot field (value
// kDramNoSlot), never in the key. Keys are mixed with a 64-bit finaliser; the
// top bits pick the stripe, the low bits the bucket.
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

  // The slot of `key`, or kDramNoSlot. `hash` is DramKeyHash(key).
  uint32_t Find(Key key, uint64_t hash) const {
    for (uint64_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Entry& e = buckets_[i];
      if (e.slot == kDramNoSlot) return kDramNoSlot;
      if (e.key == key) return e.slot;
    }
  }
  void Prefetch(uint64_t hash) const { __builtin_prefetch(&buckets_[hash & mask_]); }
  // REQUIRES: key absent, slot != kDramNoSlot.
  void Insert(Key key, uint64_t hash, uint32_t slot);
  // True when the key was present.
  bool Erase(Key key, uint64_t hash);

  uint64_t size() const { return size_; }
  uint64_t bytes() const { return (mask_ + 1) * sizeof(Entry); }

 private:
  struct Entry {
    Key key;
    uint32_t slot;
  };
  struct Buckets {  // a vector when small, a huge-page arena when large
    std::vector<Entry> small;
    std::unique_ptr<DramArena> large;
    Entry* data = nullptr;
  };
  Buckets Allocate(uint64_t n) const;  // n empty buckets
  void Grow();

  bool huge_pages_;
  Buckets storage_;
  Entry* buckets_;  // storage_.data
  uint64_t mask_;
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
