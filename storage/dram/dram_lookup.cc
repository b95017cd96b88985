#include "storage/dram/dram_lookup.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <vector>

#include "base/mutex.h"
#include "base/race_annotations.h"
#include "storage/dram/dram_index.h"
#include "storage/dram/dram_shard_internal.h"
#include "storage/dram/limits.h"

namespace strata::storage {
namespace {

using View = DramShard::LookupView;
using Entry = DramHashMap::Entry;

// The locked path: the key found under its stripe's read lock and its row
// copied under it. Out of line; the thread sanitizer checks its reads.
[[gnu::noinline]] bool LockedLookup(const View& v, const DramIndex::Stripe& stripe, Key key,
                                    std::byte* out, bool* dirty) {
  const uint64_t hash = DramKeyHash(key);
  base::ReaderLock lock(&stripe.mu);
  auto key_at = [&v](uint32_t slot) {
    return reinterpret_cast<const DramSlotHeader*>(v.slots + slot * v.slot_bytes)->key;
  };
  const uint32_t slot = stripe.map.Find(key, hash, key_at, dirty);
  if (slot == kDramNoSlot) return false;
  std::memcpy(out, v.slots + slot * v.slot_bytes + kDramSlotHeaderBytes, v.row_bytes);
  return true;
}

}  // namespace

// The optimistic reads (entries, slot headers, rows) race with writers by
// design and are checked by the stripes' counts (see the header): the
// thread sanitizer records none of this thread's reads from the first
// stage to the count's check but on the locked path. The analysis cannot
// follow the arrays locks taken in a loop nor the maps read without their
// stripes' locks.
uint64_t DramLookup(std::span<const View> views, std::span<const Key> keys,
                    std::span<std::byte> rows, std::span<uint8_t> found, std::span<uint8_t> dirty,
                    std::span<DramLookupCounts> counts) NO_THREAD_SAFETY_ANALYSIS {
  constexpr uint32_t kAhead = kDramLookupAhead;
  constexpr uint32_t kRing = std::bit_ceil(2 * kAhead + 1);
  constexpr uint16_t kRetry = 1;  // look again under the lock
  constexpr uint16_t kDirty = 2;
  constexpr uint64_t kLine = DramHashMap::kBucketEntries;
  struct alignas(64) InFlight {
    const DramIndex::Stripe* stripe;
    const Entry* home;   // the key's home line
    const Entry* other;  // its other candidate line (the home in a one-line map)
    uint32_t seq;        // the stripe's count at stage 1
    uint32_t tag;
    uint32_t slot;  // the first tag match's, or kDramNoSlot
    uint16_t shard;
    uint16_t flags;
  };
  // What the first stage reads of a shard, read once per call with its
  // arrays held: the stripes' headers (their counts), where their buckets
  // are, and the slots. A key's stripe header is then one line, its count.
  struct Shard {
    const DramIndex::Stripe* stripes;
    const Entry* base;
    uint64_t segment;  // entries per stripe
    uint64_t lines;    // lines per stripe
    uint32_t shift;
    uint32_t stripe_mask;
  };
  for (const View& v : views) v.index->arrays_mu().lock_shared();
  thread_local std::vector<Shard> shards_tl;
  std::vector<Shard>& shards = shards_tl;
  shards.resize(views.size());
  for (size_t s = 0; s < views.size(); ++s) {
    const DramIndex& index = *views[s].index;
    const DramIndex::Layout layout = index.layout();
    shards[s] = {
        &index.stripe(0),          layout.base,        layout.segment, layout.segment / kLine,
        index.stripe_shift() & 63, index.stripes() - 1};
  }
  STRATA_IGNORE_READS_BEGIN();
  const Shard* const shards_at = shards.data();
  const View* const views_at = views.data();
  DramLookupCounts* const counts_at = counts.data();
  const uint32_t shard_mask = static_cast<uint32_t>(views.size()) - 1;
  const uint32_t rb = views[0].row_bytes;
  const uint32_t row_prefetch_bytes = std::min<uint32_t>(kDramSlotHeaderBytes + rb, 1024);
  const Key* const keys_at = keys.data();
  std::byte* const out = rows.data();
  uint8_t* const found_at = found.data();
  uint8_t* const dirty_at = dirty.empty() ? nullptr : dirty.data();
  std::array<InFlight, kRing> ring;
  const uint64_t n = keys.size();
  uint64_t hits = 0;
  for (uint64_t j = 0; j < n + 2 * kAhead; ++j) {
    if (j < n) {
      InFlight& f = ring[j & (kRing - 1)];
      const uint64_t hash = DramKeyHash(keys_at[j]);
      f.shard = static_cast<uint16_t>((hash >> kDramShardHashShift) & shard_mask);
      const Shard& sh = shards_at[f.shard];
      const uint64_t s = (hash >> sh.shift) & sh.stripe_mask;
      f.stripe = sh.stripes + s;
      f.seq = f.stripe->mu.Seq();
      f.tag = DramHashMap::TagOf(hash);
      const Entry* lines = sh.base + s * sh.segment;
      const uint64_t home = DramHashMap::HomeIn(f.tag, sh.lines);
      f.home = lines + home * kLine;
      f.other = lines + DramHashMap::AltIn(home, f.tag, sh.lines) * kLine;
      __builtin_prefetch(f.home);
      __builtin_prefetch(f.other);
    }
    if (j >= kAhead && j - kAhead < n) {
      InFlight& f = ring[(j - kAhead) & (kRing - 1)];
      f.slot = kDramNoSlot;
      f.flags = 0;
      if ((f.seq & 1) != 0) {
        f.flags = kRetry;  // a writer is in
      } else {
        const uint32_t want = f.tag << 1;
        const Entry* line = f.home;
        uint32_t match = DramHashMap::MatchMask(line, want);
        if (match == 0 && f.other != f.home) {
          line = f.other;
          match = DramHashMap::MatchMask(line, want);
        }
        if (match != 0) [[likely]] {
          const Entry* e = line + __builtin_ctz(match);
          // Each field read once: a torn pair is caught by the count, a
          // torn slot by the bound before it is used.
          const uint32_t slot = __atomic_load_n(&e->slot, __ATOMIC_RELAXED);
          const uint32_t tag_dirty = __atomic_load_n(&e->tag_dirty, __ATOMIC_RELAXED);
          const View& v = views_at[f.shard];
          if (slot < v.slots_max) [[likely]] {
            f.slot = slot;
            f.flags = (tag_dirty & 1) != 0 ? kDirty : 0;
            const std::byte* at = v.slots + slot * v.slot_bytes;
            for (uint32_t off = 0; off < row_prefetch_bytes; off += 64) {
              __builtin_prefetch(at + off);
            }
          } else {
            f.flags = kRetry;
          }
        } else if (DramHashMap::CountIn(f.home) != 0) {
          f.flags = kRetry;  // the key may be in the stash
        }
      }
    }
    if (j >= 2 * kAhead) {
      const uint64_t i = j - 2 * kAhead;
      const InFlight& f = ring[i & (kRing - 1)];
      const View& v = views_at[f.shard];
      std::byte* const to = out + i * rb;
      bool retry = (f.flags & kRetry) != 0;
      bool hit = false;
      bool d = (f.flags & kDirty) != 0;
      if (!retry && f.slot != kDramNoSlot) {
        const std::byte* at = v.slots + f.slot * v.slot_bytes;
        if (__atomic_load_n(reinterpret_cast<const Key*>(at), __ATOMIC_RELAXED) == keys_at[i])
            [[likely]] {
          std::memcpy(to, at + kDramSlotHeaderBytes, rb);
          hit = true;
        } else {
          retry = true;  // a false tag match, or the slot changed hands
        }
      }
      if (!retry) {
        std::atomic_thread_fence(std::memory_order_acquire);
        retry = f.stripe->mu.SeqRelaxed() != f.seq;
      }
      DramLookupCounts& c = counts_at[f.shard];
      if (retry) [[unlikely]] {
        ++c.retries;
        STRATA_IGNORE_READS_END();
        hit = LockedLookup(v, *f.stripe, keys_at[i], to, &d);
        STRATA_IGNORE_READS_BEGIN();
      }
      found_at[i] = hit ? 1 : 0;
      if (dirty_at != nullptr) dirty_at[i] = hit && d ? 1 : 0;
      if (hit) {
        ++c.hits;
        ++hits;
      } else {
        ++c.misses;
      }
    }
  }
  STRATA_IGNORE_READS_END();
  for (const View& v : views) v.index->arrays_mu().unlock_shared();
  return hits;
}

}  // namespace strata::storage
