// DramShard: the eviction order. Every row carries a 26-bit code of its next
// use in its metadata word; the next victims sit in two queues: front_, the
// best rows found by the last sweep of the metadata, sorted, and late_, a
// heap of rows filed since with a code above front_min_ (the smallest code in
// front_ when it was made). A row's queue entry is live while the row has
// kDramMetaQueued and the entry's code; every change of code or eviction
// state clears the flag (the old entry goes stale and is skipped) and files
// the row again. So a pop is exact at code level: no row outside the queues
// ranks above front_min_, and within them the larger code leaves first.
// Victim selection (SelectVictims, PopVictim) lives here too.
#include <algorithm>
#include <bit>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/assert.h"
#include "storage/dram/dram_shard.h"
#include "storage/dram/dram_shard_internal.h"
#include "storage/dram/limits.h"

namespace strata::storage {
namespace {

constexpr uint32_t kValueBits = kDramCodeBits - 2;  // below the 2 class bits
constexpr uint32_t kMantissaBits = 18;              // exact below 2^18
constexpr uint32_t kClassNever = 3, kClassFallback = 2, kClassClock = 1;
constexpr uint32_t kFineBits = kDramCodeBits - kDramCoarseBits;

// A monotone 24-bit code of x < 2^63: x itself below 2^18, beyond that an
// exponent and the 18 bits after the leading one (relative error < 2^-18).
uint32_t Encode(uint64_t x) {
  if (x < (uint64_t{1} << kMantissaBits)) return static_cast<uint32_t>(x);
  const uint32_t p = 63 - static_cast<uint32_t>(std::countl_zero(x));  // >= 18
  const uint32_t e = p - kMantissaBits + 1;                            // 1..45
  const uint32_t mantissa =
      static_cast<uint32_t>(x >> (p - kMantissaBits)) & ((1u << kMantissaBits) - 1);
  return e << kMantissaBits | mantissa;
}
static_assert((uint64_t{45} << kMantissaBits | ((1u << kMantissaBits) - 1)) <
              (uint64_t{1} << kValueBits));

// True when the 16 words at p all equal v: Threshold's test of a block of
// metadata words. With SSE2 four compares and one movemask (the compiler
// left the scalar loop unvectorized: 3.4 instructions per word, callgrind).
bool AllEqual16(const uint32_t* p, uint32_t v) {
#if defined(__SSE2__)
  const __m128i want = _mm_set1_epi32(static_cast<int>(v));
  const auto* q = reinterpret_cast<const __m128i*>(p);
  const __m128i eq = _mm_and_si128(_mm_and_si128(_mm_cmpeq_epi32(_mm_loadu_si128(q), want),
                                                 _mm_cmpeq_epi32(_mm_loadu_si128(q + 1), want)),
                                   _mm_and_si128(_mm_cmpeq_epi32(_mm_loadu_si128(q + 2), want),
                                                 _mm_cmpeq_epi32(_mm_loadu_si128(q + 3), want)));
  return _mm_movemask_epi8(eq) == 0xffff;
#else
  uint32_t diff = 0;
  for (uint32_t i = 0; i < 16; ++i) diff |= p[i] ^ v;
  return diff == 0;
#endif
}

}  // namespace

// The heap order of late_: the largest code on top.
bool DramShard::QueueLess(const QueueEntry& a, const QueueEntry& b) { return a.code < b.code; }

uint32_t DramShard::CodeOf(Clock next_use) const {
  if (next_use == kClockNever) return kClassNever << kValueBits;
  if (next_use >= options_.fallback_base) {
    // Nearest below fallback_end first: the smallest score ranks highest.
    const uint64_t score = next_use >= options_.fallback_end
                               ? 0
                               : static_cast<uint64_t>(options_.fallback_end - 1 - next_use);
    return kClassFallback << kValueBits | ((1u << kValueBits) - 1 - Encode(score));
  }
  // A clock in the past ranks as the nearest use.
  if (next_use < 0) return 0;
  return kClassClock << kValueBits | Encode(static_cast<uint64_t>(next_use));
}

// File's rest: the row is evictable, unqueued and ranks above front_min_.
void DramShard::FileLate(uint32_t table, uint32_t slot) {
  uint32_t& meta = Meta(table, slot);
  const uint32_t code = DramMetaCode(meta);
  if (late_.size() >= front_rows_max_) {
    DropQueues();  // many rows outrank the front: sweep again instead
    return;
  }
  late_.push_back({code, table, slot});
  std::push_heap(late_.begin(), late_.end(), QueueLess);
  meta |= kDramMetaQueued;
}

void DramShard::DropQueues() {
  // Every row with the queued flag has an entry in one of the queues (stale
  // entries included), so clearing the flag of each entry's row clears them
  // all without a pass over the metadata. Afterwards nothing is filed
  // (front_min_ is kDramNoFront) until the next sweep.
  for (const QueueEntry& e : front_) Meta(e.table, e.slot) &= ~kDramMetaQueued;
  for (const QueueEntry& e : late_) Meta(e.table, e.slot) &= ~kDramMetaQueued;
  front_.clear();
  late_.clear();
  front_min_ = kDramNoFront;
}

bool DramShard::Threshold(uint64_t quota, uint32_t* code, uint64_t* take, uint64_t* count) const {
  // Pass 1: histogram of the evictable codes' top kDramCoarseBits. Counted
  // by runs of equal codes (rows next to each other with the same code, the
  // common case, cost one add per run rather than a chain of increments of
  // one counter through memory); a run's code also tells whether its bin
  // holds more than one code.
  constexpr uint32_t kNoCode = UINT32_MAX;
  // The histograms are members, reused: no allocation (nor, for the fine
  // one's 128 KiB, a fresh mapping and its page faults) per sweep.
  std::vector<uint64_t>& coarse = hist_coarse_;
  std::vector<uint32_t>& only = hist_only_;  // kNoCode - 1: mixed
  coarse.assign(uint64_t{1} << kDramCoarseBits, 0);
  only.assign(uint64_t{1} << kDramCoarseBits, kNoCode);
  uint64_t total = 0;
  // The lambda reaches the histograms through their data: the analysis
  // does not know that a lambda runs under the caller's mu_.
  uint64_t* const coarse_at = coarse.data();
  uint32_t* const only_at = only.data();
  auto end_run = [&](uint32_t run_code, uint64_t run) {
    if (run == 0) return;
    const uint32_t bin = run_code >> kFineBits;
    coarse_at[bin] += run;
    total += run;
    if (only_at[bin] == kNoCode) {
      only_at[bin] = run_code;
    } else if (only_at[bin] != run_code) {
      only_at[bin] = kNoCode - 1;
    }
  };
  const uint32_t evict_mask = evict_mask_, evict_occupied = evict_occupied_;
  for (const auto& t : tables_) {
    const TableSlots& ts = slots_[t->pos];
    const uint32_t* const meta_at = ts.meta;
    uint32_t run_code = 0;
    uint64_t run = 0;
    // A word equal to the one before it (same code, same flags: rows filed
    // alike, the common case) costs one compare and one add.
    uint32_t last = 0;
    uint64_t last_evictable = 0;     // 1 when `last` is evictable
    constexpr uint64_t kBlock = 16;  // words compared at once (AllEqual16)
    for (uint64_t s = 0; s < ts.touched; ++s) {
      // Long runs of words equal to `last` a block at a time.
      while (s + kBlock <= ts.touched && AllEqual16(meta_at + s, last)) {
        run += kBlock * last_evictable;
        s += kBlock;
      }
      if (s == ts.touched) break;
      const uint32_t meta = meta_at[s];
      if (meta == last) {
        run += last_evictable;
        continue;
      }
      last = meta;
      last_evictable = (meta & evict_mask) == evict_occupied ? 1 : 0;
      if (last_evictable == 0) continue;
      const uint32_t c = DramMetaCode(meta);
      if (c != run_code) {
        end_run(run_code, run);
        run = 0;
        run_code = c;
      }
      ++run;
    }
    end_run(run_code, run);
  }
  if (total == 0) return false;
  quota = std::min(quota, total);
  *count = quota;
  uint64_t above = 0;
  uint32_t bin = static_cast<uint32_t>(coarse.size());
  while (bin > 0 && above + coarse[bin - 1] < quota) above += coarse[--bin];
  --bin;                          // the bin where the quota is reached
  if (only[bin] < kNoCode - 1) {  // one code in the bin: no second pass
    *code = only[bin];
    *take = quota - above;
    return true;
  }
  // Pass 2: the remaining bits of the codes in that bin.
  std::vector<uint64_t>& fine = hist_fine_;
  fine.assign(uint64_t{1} << kFineBits, 0);
  for (const auto& t : tables_) {
    const TableSlots& ts = slots_[t->pos];
    for (uint64_t s = 0; s < ts.touched; ++s) {
      const uint32_t meta = ts.meta[s];
      if (Evictable(meta) && DramMetaCode(meta) >> kFineBits == bin) {
        ++fine[DramMetaCode(meta) & ((1u << kFineBits) - 1)];
      }
    }
  }
  uint32_t f = static_cast<uint32_t>(fine.size());
  while (f > 0 && above + fine[f - 1] < quota) above += fine[--f];
  --f;
  *code = bin << kFineBits | f;
  *take = quota - above;
  return true;
}

bool DramShard::Sweep() {
  ++sweeps_;
  DropQueues();
  uint32_t min_code = 0;
  uint64_t take = 0, count = 0;
  if (!Threshold(front_rows_max_, &min_code, &take, &count)) return false;
  // The rows above min_code and the first `take` at it (in table and slot
  // order): `count` rows, so the pass ends once it has them all. Written
  // into front_ sized up front, through locals (the metadata stores could
  // alias a vector's fields as far as the compiler knows).
  front_.resize(count);
  QueueEntry* const queue = front_.data();
  uint64_t got = 0;
  const uint32_t evict_mask = evict_mask_, evict_occupied = evict_occupied_;
  for (const auto& t : tables_) {
    const TableSlots& ts = slots_[t->pos];
    uint32_t* const meta_at = ts.meta;
    const uint64_t touched = ts.touched;
    const uint32_t table = t->pos;
    for (uint64_t s = 0; s < touched && got < count; ++s) {
      const uint32_t meta = meta_at[s];
      if ((meta & evict_mask) != evict_occupied) continue;
      const uint32_t code = DramMetaCode(meta);
      if (code < min_code) continue;
      if (code == min_code) {
        if (take == 0) continue;
        --take;
      }
      queue[got++] = {code, table, static_cast<uint32_t>(s)};
      meta_at[s] = meta | kDramMetaQueued;
    }
  }
  front_.resize(got);
  // Back = next victim; among equal codes the lower slot (of the lower
  // table) first. Taken in table and slot order, so reversed they are in
  // order already when the codes are (all equal, say).
  std::reverse(front_.begin(), front_.end());
  auto code_less = [](const QueueEntry& a, const QueueEntry& b) { return a.code < b.code; };
  if (!std::is_sorted(front_.begin(), front_.end(), code_less)) {
    std::sort(front_.begin(), front_.end(), [](const QueueEntry& a, const QueueEntry& b) {
      if (a.code != b.code) return a.code < b.code;
      if (a.table != b.table) return a.table > b.table;
      return a.slot > b.slot;
    });
  }
  front_min_ = min_code;
  return true;
}

[[gnu::always_inline]] inline bool DramShard::PopVictim(Victim* v) {
  while (true) {
    if (front_.empty() && late_.empty() && !Sweep()) return false;
    QueueEntry e;
    if (!late_.empty() && (front_.empty() || late_.front().code > front_.back().code)) {
      std::pop_heap(late_.begin(), late_.end(), QueueLess);
      e = late_.back();
      late_.pop_back();
    } else {
      e = front_.back();
      front_.pop_back();
      if (front_.size() > kDramPrefetchRows) {  // the metadata word of a later victim
        const QueueEntry& ahead = front_[front_.size() - kDramPrefetchRows];
        __builtin_prefetch(&Meta(ahead.table, ahead.slot));
      }
    }
    uint32_t& meta = Meta(e.table, e.slot);
    if ((meta & kDramMetaQueued) == 0 || DramMetaCode(meta) != e.code) continue;  // stale
    meta &= ~kDramMetaQueued;
    if (!Evictable(meta)) continue;  // filed again once evictable
    *v = {e.table, e.slot};
    return true;
  }
}

// Here, beside PopVictim, which is inlined into its loop.
Status DramShard::SelectVictims(const Table& t, uint64_t bytes_needed,
                                std::vector<Victim>* victims) {
  uint64_t freed = 0;
  while (freed < bytes_needed) {
    Victim v;
    if (!PopVictim(&v)) {
      // The victims popped so far stay; the next pop sweeps them up again.
      for (const Victim& u : *victims) Meta(u.table, u.slot) &= ~kDramMetaHold;
      victims->clear();
      DropQueues();
      std::string room = std::to_string(options_.dram_bytes_max) + " own";
      if (pool_ != nullptr) {
        room += " + " + std::to_string(borrowed_) +
                " borrowed (shared pool: " + std::to_string(pool_->free()) + " of " +
                std::to_string(pool_->bytes()) + " free)";
      }
      return Status::ResourceExhausted(
          "dram cache Insert of " + t.Name() + ": no room for " + std::to_string(bytes_needed) +
          " more row bytes (this shard's room " + room + " + " + std::to_string(leaving_bytes_) +
          " leaving, used " + std::to_string(bytes_used_) +
          "): the batch is larger than the room, or the other resident rows are pinned, or "
          "dirty with no backing store");
    }
    Meta(v.table, v.slot) |= kDramMetaHold;  // so a sweep does not pick it again
    victims->push_back(v);
    freed += tables_[v.table]->spec.row_bytes;
  }
  return Status::Ok();
}

}  // namespace strata::storage
