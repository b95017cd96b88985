// DramShard: Insert (whole or in pieces), Erase, moves up, write-back,
// FlushDirty and CleanAhead (victim selection: dram_order.cc).
//
// An Insert runs in steps, holding the mutation mutex (the eviction order's
// lock) only for the short ones:
//   1. ClaimKeys (mutex): the batch's keys are claimed, so no other Insert
//      places one of them meanwhile (it waits for this one); the same probe
//      of the claim set drops earlier duplicates (the last occurrence wins).
//   2. ProbeKeys (stripe read locks, keys grouped by stripe): each key's
//      slot, or absent. Claimed, an absent key stays absent; a present one
//      may only leave (evicted or erased), which step 3 sees.
//   3. Prepare (mutex): rows to overwrite are held; victims are popped from
//      the eviction queues and held; each new row gets a slot (this table's
//      victims' first, the last popped first, as the free list would hand
//      them out; then free slots); bytes and rows are accounted.
//   4. Without the mutex: dirty victims are written back (one MultiPut per
//      table; a victim stays resident and readable until then), erased from
//      the index (one exclusive hold per stripe), the new rows copied into
//      their slots (reachable through no entry now) and published, overwrites
//      copied, both under one exclusive hold per stripe.
//   5. Finish (mutex): flags and codes set, spare victim slots freed, holds
//      and claims dropped.
// A held row is no victim, and Erase, EndMoveUp and BeginMoveUp wait for it;
// ForEach and FlushDirty wait until no Insert is between steps 3 and 5.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>

#include "base/assert.h"
#include "storage/dram/dram_shard.h"
#include "storage/dram/dram_shard_internal.h"
#include "storage/dram/limits.h"

namespace strata::storage {

// One Insert's scratch, per thread (no allocation once warm). Per pick (a
// key that goes in: the last occurrence of each key, in key order).
struct DramShard::InsertWork {
  std::vector<uint64_t> key_hashes;    // per key, when the caller gave none
  const uint64_t* key_hash = nullptr;  // per key: the caller's or key_hashes
  uint32_t owner = 0;                  // of this Insert's claims
  std::vector<uint32_t> picks;         // key positions
  std::vector<uint64_t> hashes;        // per pick
  std::vector<uint32_t> bounds;        // stripe s's picks: by_stripe[bounds[s], bounds[s + 1])
  std::vector<uint32_t> by_stripe;     // pick numbers grouped by stripe
  std::vector<uint32_t> cursor;        // counting sort scratch
  std::vector<uint32_t> groups;        // stripes with picks, ascending
  std::vector<uint8_t> deferred;       // VisitGroupsLocked's scratch
  std::vector<uint32_t> slots;         // per pick: the probe's slot, then the row's slot
  std::vector<uint8_t> fresh;          // per pick: 1 a new row, 0 an overwrite
  std::vector<uint8_t> allocated;      // per pick: its slot came from AllocateSlot
  uint64_t new_rows = 0;
  uint64_t freed_bytes = 0;     // victims' row bytes
  std::vector<Victim> victims;  // in pop order
  std::vector<uint8_t> victim_dirty;
  std::vector<uint8_t> victim_reused;  // its slot takes a new row
  std::vector<uint64_t> victim_hashes;
  std::vector<uint64_t> victim_sort;  // (table, stripe, pop position) packed, sorted
  std::vector<uint64_t> victim_sort_scratch;
  std::vector<uint32_t> victim_groups;  // starts of (table, stripe) runs in victim_sort, then m
  std::vector<uint8_t> written;         // per table position: dirty victims written
  std::vector<Key> wb_keys;
  std::vector<std::byte> wb_rows;
};

namespace {
// Packs a victim's (table, stripe, position) so that a sort groups victims by
// table, then stripe, keeping pop order within a group.
constexpr uint32_t kPosBits = 32;
constexpr uint32_t kStripeBits = 12;  // kDramLockStripesMax = 4096
static_assert(kDramLockStripesMax <= (1u << kStripeBits));
static_assert(kTablesMax <= (1u << (64 - kPosBits - kStripeBits)));
uint64_t PackVictim(uint32_t table, uint32_t stripe, uint32_t pos) {
  return (uint64_t{table} << kStripeBits | stripe) << kPosBits | pos;
}
uint32_t VictimPos(uint64_t packed) { return static_cast<uint32_t>(packed); }
uint32_t VictimGroup(uint64_t packed) { return static_cast<uint32_t>(packed >> kPosBits); }
uint32_t VictimTable(uint64_t packed) {
  return static_cast<uint32_t>(packed >> (kPosBits + kStripeBits));
}

// Keeps the `keep` first entries of v by `less` (in no order).
template <typename Entry, typename Less>
void KeepFirst(std::vector<Entry>& v, uint64_t keep, const Less& less) {
  if (v.size() <= keep) return;
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(keep), v.end(), less);
  v.resize(keep);
}

// Runs visit(g) for the groups g < count of an Insert's stripe work, each
// with its stripe's lock (mutex_of(g)) held, exclusively or, kShared, shared.
// It starts at group `first` and goes round, and a group whose lock is busy
// is left for a second round that waits for it: two Inserts walking the same
// stripes in the same order would otherwise queue behind each other stripe
// after stripe. visit(g) returns false when the group cannot be done under
// the lock (its stripe must grow first): then grow(g) runs without the lock
// and the group is tried again. One lock at a time, waiting only in the
// second round, so the Lookup pipeline's ascending order is kept. The
// analysis cannot follow locks chosen at run time: visit asserts its lock.
template <bool kShared, typename MutexOf, typename Visit, typename Grow>
void VisitGroupsLocked(uint32_t count, uint32_t first, std::vector<uint8_t>& deferred,
                       const MutexOf& mutex_of, const Visit& visit,
                       const Grow& grow) NO_THREAD_SAFETY_ANALYSIS {
  deferred.assign(count, 0);
  bool any = false;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t g = (first + i) % count;
    base::SeqSharedMutex& mu = mutex_of(g);
    if (!(kShared ? mu.try_lock_shared() : mu.try_lock())) {
      deferred[g] = 1;
      any = true;
      continue;
    }
    const bool done = visit(g);
    kShared ? mu.unlock_shared() : mu.unlock();
    if (!done) {
      grow(g);
      deferred[g] = 1;
      any = true;
    }
  }
  for (uint32_t i = 0; any && i < count; ++i) {
    const uint32_t g = (first + i) % count;
    if (deferred[g] == 0) continue;
    base::SeqSharedMutex& mu = mutex_of(g);
    while (true) {
      kShared ? mu.lock_shared() : mu.lock();
      const bool done = visit(g);
      kShared ? mu.unlock_shared() : mu.unlock();
      if (done) break;
      grow(g);
    }
  }
}
}  // namespace

void DramShard::FreeSlot(uint32_t table, uint32_t slot) {
  Meta(table, slot) = 0;  // any queue entry goes stale
  // Out of the index (no lookup reads the key any more): the key field
  // links the free slots, reused last in, first out.
  tables_[table]->Header(slot).key = slots_[table].free_head;
  slots_[table].free_head = slot;
}

void DramShard::BorrowLocked(uint64_t want) {
  want = std::min(want, borrow_max_ - borrowed_);
  if (pool_ != nullptr && want > 0) borrowed_ += pool_->Take(want);
}

void DramShard::GiveBackLocked() {
  if (borrowed_ == 0) return;
  // Leaving rows are still resident (a move up may not happen), and the
  // victims of in-flight Inserts come back if their write-back fails.
  const uint64_t held = bytes_used_ + inflight_freed_;
  const uint64_t room = options_.dram_bytes_max + borrowed_;
  if (held >= room) return;
  const uint64_t back = std::min(borrowed_, room - held);
  borrowed_ -= back;
  pool_->Give(back);
}

void DramShard::Release(const Victim& v) {
  Release(v, DramKeyHash(tables_[v.table]->KeyAt(v.slot)));
}

void DramShard::Release(const Victim& v, uint64_t hash) {
  Table& t = *tables_[v.table];
  {
    DramIndex::Stripe& stripe = t.index->stripe(t.index->StripeOf(hash));
    base::WriterLock lock(&stripe.mu);
    bool erased = stripe.map.Erase(hash, v.slot);
    STRATA_ASSERT(erased, "dram cache: released row missing from the index");
  }
  if ((Meta(t.pos, v.slot) & kDramMetaPinned) != 0) slots_[t.pos].pins.erase(v.slot);
  FreeSlot(t.pos, v.slot);
  --rows_;
  bytes_used_ -= t.spec.row_bytes;
}

void DramShard::ClaimKeys(const Table& t, std::span<const Key> keys,
                          std::span<const uint32_t> positions, InsertWork& w) {
  base::MutexLock lock(&mu_);
  w.owner = claims_.NewOwner();
  while (true) {
    // Keys from the last back: the last occurrence of each key wins, so a
    // key this Insert has claimed already is an earlier duplicate, dropped.
    // The picks come out in reverse key order (Insert turns them round).
    w.picks.clear();
    w.hashes.clear();
    size_t p = positions.empty() ? keys.size() : positions.size();
    bool other = false;
    while (p-- > 0 && !other) {
      const size_t i = positions.empty() ? p : positions[p];
      switch (claims_.Add(t.pos, keys[i], w.key_hash[i], w.owner)) {
        case DramKeyClaims::Claim::kAdded:
          w.picks.push_back(static_cast<uint32_t>(i));
          w.hashes.push_back(w.key_hash[i]);
          break;
        case DramKeyClaims::Claim::kOwn:
          break;
        case DramKeyClaims::Claim::kOther:
          other = true;
          break;
      }
    }
    if (!other) return;
    // Another Insert is placing a key of this batch: wait until it drops its
    // claims.
    for (size_t k = 0; k < w.picks.size(); ++k) {
      claims_.Remove(t.pos, keys[w.picks[k]], w.hashes[k]);
    }
    insert_waits_.fetch_add(1, std::memory_order_relaxed);
    state_cv_.Wait(&mu_);
  }
}

void DramShard::DropClaims(const Table& t, std::span<const Key> keys, const InsertWork& w) {
  // Every claim is this Insert's (no other in flight) and the table is not
  // much larger than them (at most 1/4 full, it keeps the size of the
  // largest batch so far): one sweep of it instead of a random access per
  // key.
  claims_.FreeOwner(w.owner);
  if (claims_.size() == w.picks.size() && claims_.capacity() <= 16 * w.picks.size()) {
    return claims_.Clear();
  }
  for (size_t k = 0; k < w.picks.size(); ++k) claims_.Remove(t.pos, keys[w.picks[k]], w.hashes[k]);
}

void DramShard::ProbeKeys(const Table& t, std::span<const Key> keys, InsertWork& w) const {
  const DramIndex& index = *t.index;
  const uint32_t stripes = index.stripes();
  const size_t n = w.picks.size();
  // Picks grouped by stripe (counting sort, stable).
  w.bounds.assign(stripes + 1, 0);
  for (size_t k = 0; k < n; ++k) ++w.bounds[index.StripeOf(w.hashes[k]) + 1];
  for (uint32_t s = 0; s < stripes; ++s) w.bounds[s + 1] += w.bounds[s];
  w.cursor.assign(w.bounds.begin(), w.bounds.end() - 1);
  w.by_stripe.resize(n);
  for (size_t k = 0; k < n; ++k) {
    w.by_stripe[w.cursor[index.StripeOf(w.hashes[k])]++] = static_cast<uint32_t>(k);
  }
  w.slots.resize(n);
  // The stripes with picks: the groups of this and of PlaceRows' pass.
  w.groups.clear();
  for (uint32_t s = 0; s < stripes; ++s) {
    if (w.bounds[s] != w.bounds[s + 1]) w.groups.push_back(s);
  }
  if (w.groups.empty()) return;
  auto key_at = [&t](uint32_t slot) { return t.KeyAt(slot); };
  VisitGroupsLocked<true>(
      static_cast<uint32_t>(w.groups.size()), static_cast<uint32_t>(w.hashes[0] % w.groups.size()),
      w.deferred, [&](uint32_t g) -> base::SeqSharedMutex& { return index.stripe(w.groups[g]).mu; },
      [&](uint32_t g) {
        const DramIndex::Stripe& stripe = index.stripe(w.groups[g]);
        stripe.mu.AssertHeld();  // shared, by VisitGroupsLocked
        const uint32_t end = w.bounds[w.groups[g] + 1];
        for (uint32_t j = w.bounds[w.groups[g]]; j < end; ++j) {
          // Across stripes too (the next stripe's lock is not held: a hint):
          // the key's two candidate lines, all an absent key's probe reads.
          if (j + kDramPrefetchRows < n) {
            index.PrefetchHint(w.hashes[w.by_stripe[j + kDramPrefetchRows]], false);
          }
          const uint32_t k = w.by_stripe[j];
          bool dirty = false;
          w.slots[k] = stripe.map.Find(keys[w.picks[k]], w.hashes[k], key_at, &dirty);
        }
        return true;
      },
      [](uint32_t) {});
}

void DramShard::Unprepare(Table& t, InsertWork& w, bool victims_too) {
  for (size_t k = 0; k < w.picks.size(); ++k) {
    const uint32_t slot = w.slots[k];
    if (slot == kDramNoSlot) continue;
    if (w.fresh[k] == 0) {
      Meta(t.pos, slot) &= ~kDramMetaHold;
      File(t.pos, slot);
      continue;
    }
    if (w.allocated[k] != 0) FreeSlot(t.pos, slot);
    w.slots[k] = kDramNoSlot;  // a new row: absent (claimed)
  }
  if (victims_too) {
    // The victims stay; the next pop sweeps them up again.
    for (const Victim& v : w.victims) Meta(v.table, v.slot) &= ~kDramMetaHold;
    w.victims.clear();
    DropQueues();
  }
}

Status DramShard::Prepare(Table& t, std::span<const Key> keys, InsertWork& w) {
  const size_t n = w.picks.size();
  const uint32_t rb = t.spec.row_bytes;
  w.fresh.resize(n);
  w.allocated.assign(n, 0);
  while (true) {
    while (quiet_waiters_ > 0) state_cv_.Wait(&mu_);
    const uint64_t gen = done_gen_;
    // Rows to overwrite are held (no victims, no other change) until Finish.
    // A row the probe found may have left since (evicted or erased): its key
    // is claimed, so it stays absent. One held by another Insert (its
    // victim, or its slot reused) is waited for.
    uint64_t new_rows = 0;
    bool busy = false;
    for (size_t k = 0; k < n; ++k) {
      if (k + kDramPrefetchRows < n && w.slots[k + kDramPrefetchRows] != kDramNoSlot) {
        __builtin_prefetch(&Meta(t.pos, w.slots[k + kDramPrefetchRows]));
      }
      w.fresh[k] = 1;
      const uint32_t slot = w.slots[k];
      if (slot == kDramNoSlot) {
        ++new_rows;
        continue;
      }
      uint32_t& meta = Meta(t.pos, slot);
      if ((meta & kDramMetaHold) != 0) {
        busy = true;
        // Only the picks before k are held: Unprepare must not see this one.
        for (size_t j = k; j < n; ++j) w.fresh[j] = 1;
        break;
      }
      if ((meta & kDramMetaOccupied) != 0 && t.KeyAt(slot) == keys[w.picks[k]]) {
        meta |= kDramMetaHold;
        w.fresh[k] = 0;
        continue;
      }
      w.slots[k] = kDramNoSlot;
      ++new_rows;
    }
    if (busy) {
      // Unprepare resets the slots of fresh picks: keep the probe's results.
      for (size_t k = 0; k < n; ++k) {
        if (w.fresh[k] == 0) {
          Meta(t.pos, w.slots[k]) &= ~kDramMetaHold;
          File(t.pos, w.slots[k]);
        }
      }
      insert_waits_.fetch_add(1, std::memory_order_relaxed);
      while (done_gen_ == gen) state_cv_.Wait(&mu_);
      continue;
    }
    // Rows moving up still occupy their slots; their bytes are admitted on
    // top of the budget (and resident bytes may be above it after a move up
    // that did not happen: then this Insert evicts down to it).
    // Room beyond this shard's own bytes is borrowed from the shared budget
    // while it has some; the rest is made by this shard's victims.
    const uint64_t bytes_new = new_rows * rb;
    uint64_t limit = options_.dram_bytes_max + borrowed_ + leaving_bytes_;
    if (bytes_used_ + bytes_new > limit) {
      BorrowLocked(bytes_used_ + bytes_new - limit);
      limit = options_.dram_bytes_max + borrowed_ + leaving_bytes_;
    }
    w.victims.clear();
    Status s;
    if (bytes_used_ + bytes_new > limit) {
      s = SelectVictims(t, bytes_used_ + bytes_new - limit, &w.victims);
    }
    bool out_of_slots = false;
    if (s.ok()) {
      // New rows take this table's victims' slots, the last popped first (as
      // the free list would hand them out), then free slots.
      const size_t m = w.victims.size();
      w.victim_reused.assign(m, 0);
      size_t r = m;
      for (size_t k = 0; k < n && !out_of_slots; ++k) {
        if (w.fresh[k] == 0) continue;
        while (r > 0 && w.victims[r - 1].table != t.pos) --r;
        if (r > 0) {
          --r;
          w.victim_reused[r] = 1;
          w.slots[k] = w.victims[r].slot;
          continue;
        }
        const uint32_t slot = AllocateSlot(t);
        if (slot == kDramNoSlot) {
          out_of_slots = true;
          break;
        }
        w.slots[k] = slot;
        w.allocated[k] = 1;
        Meta(t.pos, slot) = kDramMetaOccupied | kDramMetaHold;  // no sweep takes it
      }
      if (!out_of_slots) {
        w.victim_dirty.resize(m);
        uint64_t freed = 0;
        for (size_t i = 0; i < m; ++i) {
          const Victim& v = w.victims[i];
          w.victim_dirty[i] =
              backing_ != nullptr && (Meta(v.table, v.slot) & kDramMetaDirty) != 0 ? 1 : 0;
          freed += tables_[v.table]->spec.row_bytes;
        }
        w.new_rows = new_rows;
        w.freed_bytes = freed;
        rows_ = rows_ + new_rows - m;
        bytes_used_ = bytes_used_ + bytes_new - freed;
        inflight_freed_ += freed;
        ++inflight_;
        return Status::Ok();
      }
      // Slots of victims still in flight in other Inserts (of other tables'
      // rows) are not free yet: retry once one finishes.
      Unprepare(t, w, /*victims_too=*/true);
      STRATA_ASSERT(inflight_ > 0, "dram cache slot arena exhausted");
      insert_waits_.fetch_add(1, std::memory_order_relaxed);
      while (done_gen_ == gen) state_cv_.Wait(&mu_);
      continue;
    }
    Unprepare(t, w, /*victims_too=*/false);
    // Rows being cleaned are victims again once their write is done, rows
    // held by other Inserts once those finish: wait (one MultiPut; no new
    // clean starts while an Insert waits), then look again, since other
    // mutations may run meanwhile.
    if (cleaning_rows_ > 0) {
      room_waits_.fetch_add(1, std::memory_order_relaxed);
      ++room_waiters_;
      while (cleaning_rows_ > 0) state_cv_.Wait(&mu_);
      --room_waiters_;
      continue;
    }
    if (inflight_ == 0) {
      GiveBackLocked();
      return s;
    }
    insert_waits_.fetch_add(1, std::memory_order_relaxed);
    while (done_gen_ == gen) state_cv_.Wait(&mu_);
  }
}

Status DramShard::WriteBackVictims(InsertWork& w) {
  // Victims grouped by table, then stripe: their hashes (keys read from
  // their slots, held, so stable), sorted.
  const size_t m = w.victims.size();
  w.victim_hashes.resize(m);
  w.victim_sort.resize(m);
  for (size_t i = 0; i < m; ++i) {
    if (i + kDramPrefetchRows < m) {
      const Victim& ahead = w.victims[i + kDramPrefetchRows];
      __builtin_prefetch(tables_[ahead.table]->rows->Slot(ahead.slot));
    }
    const Victim& v = w.victims[i];
    const Table& t = *tables_[v.table];
    w.victim_hashes[i] = DramKeyHash(t.KeyAt(v.slot));
    w.victim_sort[i] =
        PackVictim(v.table, t.index->StripeOf(w.victim_hashes[i]), static_cast<uint32_t>(i));
  }
  bool one_table = true;
  for (size_t i = 1; i < m && one_table; ++i) one_table = w.victims[i].table == w.victims[0].table;
  if (one_table && m > 0) {
    // The common case: a counting sort by stripe (stable: pop order within).
    const uint32_t stripes = tables_[w.victims[0].table]->index->stripes();
    const uint32_t stripe_mask = (1u << kStripeBits) - 1;
    w.cursor.assign(stripes + 1, 0);
    for (uint64_t v : w.victim_sort) ++w.cursor[(VictimGroup(v) & stripe_mask) + 1];
    for (uint32_t s = 0; s < stripes; ++s) w.cursor[s + 1] += w.cursor[s];
    w.victim_sort_scratch.resize(m);
    for (uint64_t v : w.victim_sort)
      w.victim_sort_scratch[w.cursor[VictimGroup(v) & stripe_mask]++] = v;
    w.victim_sort.swap(w.victim_sort_scratch);
  } else {
    std::sort(w.victim_sort.begin(), w.victim_sort.end());
  }
  w.written.assign(tables_.size(), 0);
  if (backing_ == nullptr) return Status::Ok();  // dirty rows never became victims
  for (size_t begin = 0; begin < m;) {
    const uint32_t table = VictimTable(w.victim_sort[begin]);
    size_t end = begin;
    while (end < m && VictimTable(w.victim_sort[end]) == table) ++end;
    const Table& t = *tables_[table];
    const uint32_t rb = t.spec.row_bytes;
    w.wb_keys.clear();
    for (size_t j = begin; j < end; ++j) {
      const uint32_t i = VictimPos(w.victim_sort[j]);
      if (w.victim_dirty[i] == 0) continue;
      w.wb_keys.push_back(t.KeyAt(w.victims[i].slot));
      w.wb_rows.resize(w.wb_keys.size() * rb);
      std::memcpy(w.wb_rows.data() + (w.wb_keys.size() - 1) * rb, t.Row(w.victims[i].slot), rb);
    }
    begin = end;
    if (w.wb_keys.empty()) continue;
    Status s = backing_->MultiPut(
        t.spec.id, w.wb_keys, std::span<const std::byte>(w.wb_rows.data(), w.wb_keys.size() * rb));
    if (!s.ok()) {
      writeback_errors_.fetch_add(1, std::memory_order_relaxed);
      return s.WithContext("dram cache write-back of " + std::to_string(w.wb_keys.size()) +
                           " dirty victims of " + t.Name());
    }
    w.written[table] = 1;
    dirty_writebacks_.fetch_add(w.wb_keys.size(), std::memory_order_relaxed);
  }
  return Status::Ok();
}

void DramShard::EraseVictims(InsertWork& w) {
  const size_t m = w.victims.size();
  if (m == 0) return;
  // Groups: runs of one (table, stripe) in victim_sort.
  w.victim_groups.clear();
  for (size_t j = 0; j < m; ++j) {
    if (j == 0 || VictimGroup(w.victim_sort[j]) != VictimGroup(w.victim_sort[j - 1])) {
      w.victim_groups.push_back(static_cast<uint32_t>(j));
    }
  }
  const uint32_t groups = static_cast<uint32_t>(w.victim_groups.size());
  w.victim_groups.push_back(static_cast<uint32_t>(m));
  auto stripe_of = [&](uint32_t g) -> DramIndex::Stripe& {
    const uint64_t v = w.victim_sort[w.victim_groups[g]];
    return tables_[VictimTable(v)]->index->stripe(VictimGroup(v) & ((1u << kStripeBits) - 1));
  };
  VisitGroupsLocked<false>(
      groups, static_cast<uint32_t>(w.victim_hashes[0] % groups), w.deferred,
      [&](uint32_t g) -> base::SeqSharedMutex& { return stripe_of(g).mu; },
      [&](uint32_t g) {
        DramIndex::Stripe& stripe = stripe_of(g);
        stripe.mu.AssertHeld();  // by VisitGroupsLocked
        for (uint32_t j = w.victim_groups[g]; j < w.victim_groups[g + 1]; ++j) {
          if (j + kDramPrefetchRows < m) {
            const uint64_t ahead = w.victim_sort[j + kDramPrefetchRows];
            tables_[VictimTable(ahead)]->index->PrefetchHint(w.victim_hashes[VictimPos(ahead)],
                                                             true);
          }
          const uint32_t i = VictimPos(w.victim_sort[j]);
          const bool erased = stripe.map.Erase(w.victim_hashes[i], w.victims[i].slot);
          STRATA_ASSERT(erased, "dram cache: a victim missing from the index");
        }
        return true;
      },
      [](uint32_t) {});
}

void DramShard::PlaceRows(Table& t, std::span<const Key> keys, std::span<const std::byte> rows,
                          std::span<const uint8_t> dirty, InsertWork& w) {
  const uint32_t rb = t.spec.row_bytes;
  const size_t n = w.picks.size();
  const uint32_t slot_bytes = DramSlotBytes(rb);
  // New rows first: their slots are reachable through no entry (victims'
  // entries are erased, other slots never published or released long ago).
  // A lookup may still be copying one through an entry it read before the
  // erase; the erase moved that stripe's count, so it reads the key again
  // under the lock (dram_lookup.h). The fence orders that count before
  // these writes in the language's model too when the erase was another
  // thread's (a slot freed by an earlier Insert): a reader that sees a byte
  // written here then sees the count moved (x86 and AArch64 keep that order
  // anyway, through the mutation mutex between the two Inserts).
  std::atomic_thread_fence(std::memory_order_release);
  for (size_t k = 0; k < n; ++k) {
    if (k + kDramPrefetchRows < n && w.fresh[k + kDramPrefetchRows] != 0) {
      const std::byte* line = t.rows->Slot(w.slots[k + kDramPrefetchRows]);
      for (uint32_t off = 0; off < std::min<uint32_t>(slot_bytes, 1024); off += 64) {
        __builtin_prefetch(line + off, 1);
      }
    }
    if (w.fresh[k] == 0) continue;
    const uint32_t i = w.picks[k];
    t.Header(w.slots[k]).key = keys[i];
    std::memcpy(t.Row(w.slots[k]), rows.data() + uint64_t{i} * rb, rb);
  }
  // Then each stripe's changes under one exclusive hold: new entries, and
  // the rows overwritten in place (lookups may be copying them).
  if (w.groups.empty()) return;
  DramIndex& index = *t.index;
  auto adds_of = [&](uint32_t s) {
    uint64_t adds = 0;
    for (uint32_t j = w.bounds[s]; j < w.bounds[s + 1]; ++j) adds += w.fresh[w.by_stripe[j]];
    return adds;
  };
  VisitGroupsLocked<false>(
      static_cast<uint32_t>(w.groups.size()), static_cast<uint32_t>(w.hashes[0] % w.groups.size()),
      w.deferred, [&](uint32_t g) -> base::SeqSharedMutex& { return index.stripe(w.groups[g]).mu; },
      [&](uint32_t g) {
        const uint32_t s = w.groups[g];
        DramIndex::Stripe& stripe = index.stripe(s);
        stripe.mu.AssertHeld();  // by VisitGroupsLocked
        if (!stripe.map.Fits(adds_of(s))) return false;
        for (uint32_t j = w.bounds[s]; j < w.bounds[s + 1]; ++j) {
          // The key's two candidate lines, where its entry goes.
          if (j + kDramPrefetchRows < n) {
            index.PrefetchHint(w.hashes[w.by_stripe[j + kDramPrefetchRows]], true);
          }
          const uint32_t k = w.by_stripe[j];
          const uint32_t i = w.picks[k];
          const bool is_dirty = !dirty.empty() && dirty[i] != 0;
          if (w.fresh[k] != 0) {
            stripe.map.Insert(w.hashes[k], w.slots[k], is_dirty);
          } else {
            std::memcpy(t.Row(w.slots[k]), rows.data() + uint64_t{i} * rb, rb);
            const bool found = stripe.map.SetDirty(w.hashes[k], w.slots[k], is_dirty);
            STRATA_ASSERT(found, "dram cache: resident row missing from the index");
          }
        }
        return true;
      },
      [&](uint32_t g) { index.Reserve(w.groups[g], adds_of(w.groups[g])); });
}

void DramShard::Finish(Table& t, std::span<const uint8_t> dirty, std::span<const Clock> next_use,
                       InsertWork& w) {
  const uint32_t never = CodeOf(kClockNever);  // every row's, without next uses
  for (size_t k = 0; k < w.picks.size(); ++k) {
    const uint32_t i = w.picks[k];
    const uint32_t slot = w.slots[k];
    const bool is_dirty = !dirty.empty() && dirty[i] != 0;
    const uint32_t code = next_use.empty() ? never : CodeOf(next_use[i]);
    uint32_t& meta = Meta(t.pos, slot);
    if (w.fresh[k] != 0) {
      // A new row: no queue entry, so SetCode's update in one store.
      meta = kDramMetaOccupied | (is_dirty ? kDramMetaDirty : 0u) | code << kDramMetaCodeShift;
      File(t.pos, slot);
    } else {
      meta &= ~(kDramMetaHold | kDramMetaDirty);
      if (is_dirty) meta |= kDramMetaDirty;
      SetCode(t.pos, slot, code);
    }
  }
  for (size_t i = 0; i < w.victims.size(); ++i) {
    if (w.victim_reused[i] == 0) FreeSlot(w.victims[i].table, w.victims[i].slot);
  }
  inflight_freed_ -= w.freed_bytes;
  GiveBackLocked();  // victims may free more than the new rows take
  evictions_.fetch_add(w.victims.size(), std::memory_order_relaxed);
  inserts_.fetch_add(w.new_rows, std::memory_order_relaxed);
}

void DramShard::Abandon(Table& t, InsertWork& w) {
  for (size_t i = 0; i < w.victims.size(); ++i) {
    const Victim& v = w.victims[i];
    if (w.victim_dirty[i] != 0 && w.written[v.table] != 0) {
      SetDirtyLocked(*tables_[v.table], v.slot, false, /*file=*/false);
    }
  }
  rows_ = rows_ + w.victims.size() - w.new_rows;
  bytes_used_ = bytes_used_ + w.freed_bytes - w.new_rows * t.spec.row_bytes;
  inflight_freed_ -= w.freed_bytes;
  GiveBackLocked();
  Unprepare(t, w, /*victims_too=*/true);
}

Status DramShard::Insert(TableId table, std::span<const Key> keys, std::span<const std::byte> rows,
                         std::span<const uint8_t> dirty, std::span<const Clock> next_use,
                         std::span<const uint32_t> positions, std::span<const uint64_t> hashes) {
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "Insert"));
  const size_t n = keys.size();
  const uint32_t rb = t->spec.row_bytes;
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "Insert", n * rb, rows.size(), "rows (bytes)", false));
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "Insert", n, dirty.size(), "dirty", true));
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "Insert", n, next_use.size(), "next_use", true));
  if (n == 0 || (!positions.empty() && positions.back() >= n)) {
    if (n == 0 && positions.empty()) return Status::Ok();
    return Status::InvalidArgument("dram cache Insert of " + t->Name() + ": a position past the " +
                                   std::to_string(n) + " keys");
  }

  thread_local InsertWork w;
  if (hashes.size() == n) {
    w.key_hash = hashes.data();
  } else {
    w.key_hashes.resize(n);
    if (positions.empty()) {
      for (size_t i = 0; i < n; ++i) w.key_hashes[i] = DramKeyHash(keys[i]);
    } else {
      for (uint32_t i : positions) w.key_hashes[i] = DramKeyHash(keys[i]);
    }
    w.key_hash = w.key_hashes.data();
  }
  // The claims keep the last occurrence of each key (the picks); in key
  // order from here on.
  ClaimKeys(*t, keys, positions, w);
  std::reverse(w.picks.begin(), w.picks.end());
  std::reverse(w.hashes.begin(), w.hashes.end());
  ProbeKeys(*t, keys, w);
  {
    base::MutexLock lock(&mu_);
    Status s = Prepare(*t, keys, w);
    if (!s.ok()) {
      DropClaims(*t, keys, w);
      lock.Unlock();
      state_cv_.SignalAll();
      return s;
    }
  }
  Status s = WriteBackVictims(w);
  if (s.ok()) {
    EraseVictims(w);
    PlaceRows(*t, keys, rows, dirty, w);
  }
  {
    base::MutexLock lock(&mu_);
    if (s.ok()) {
      Finish(*t, dirty, next_use, w);
    } else {
      Abandon(*t, w);
    }
    DropClaims(*t, keys, w);
    --inflight_;
    ++done_gen_;
  }
  state_cv_.SignalAll();
  return s;
}

Status DramShard::InsertInPieces(TableId table, std::span<const Key> keys,
                                 std::span<const std::byte> rows, std::span<const uint8_t> dirty,
                                 std::span<const Clock> next_use,
                                 std::span<const uint32_t> positions,
                                 std::span<const uint64_t> hashes, uint64_t* placed) {
  *placed = 0;
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "InsertInPieces"));
  const size_t n = keys.size();
  const uint32_t rb = t->spec.row_bytes;
  STRATA_RETURN_IF_ERROR(
      CheckKeySpan(*t, "InsertInPieces", n * rb, rows.size(), "rows (bytes)", false));
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "InsertInPieces", n, dirty.size(), "dirty", true));
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "InsertInPieces", n, next_use.size(), "next_use", true));
  // Pieces of the rows this shard's own bytes hold, so a piece fits once
  // this shard's victims are gone, whatever the others borrowed (slots_max
  // adds the borrowable and transit slots).
  const uint64_t piece_max = std::max<uint64_t>(1, options_.dram_bytes_max / rb);
  if (!positions.empty()) {
    while (*placed < positions.size()) {
      const uint64_t m = std::min<uint64_t>(piece_max, positions.size() - *placed);
      STRATA_RETURN_IF_ERROR(
          Insert(table, keys, rows, dirty, next_use, positions.subspan(*placed, m), hashes));
      *placed += m;
    }
    return Status::Ok();
  }
  while (*placed < n) {
    const uint64_t at = *placed;
    const uint64_t m = std::min<uint64_t>(piece_max, n - at);
    STRATA_RETURN_IF_ERROR(Insert(table, keys.subspan(at, m), rows.subspan(at * rb, m * rb),
                                  dirty.empty() ? dirty : dirty.subspan(at, m),
                                  next_use.empty() ? next_use : next_use.subspan(at, m)));
    *placed += m;
  }
  return Status::Ok();
}

bool DramShard::AnyFlagged(const Table& t, std::span<const Key> keys, uint32_t flags) const {
  for (Key key : keys) {
    uint32_t slot = FindSlot(t, key);
    if (slot != kDramNoSlot && (Meta(t.pos, slot) & flags) != 0) return true;
  }
  return false;
}

void DramShard::WaitInsertsDone() {
  ++quiet_waiters_;
  while (inflight_ > 0) state_cv_.Wait(&mu_);
  --quiet_waiters_;
  state_cv_.SignalAll();  // Inserts waiting for quiet_waiters_ to reach 0
}

Status DramShard::Erase(TableId table, std::span<const Key> keys) {
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "Erase"));
  base::MutexLock lock(&mu_);
  // A row being cleaned stays until its write is done: released now, the key
  // could come back dirty and be written again, racing the older copy. A row
  // an Insert holds (its victim, or its overwrite) is waited for too.
  while (AnyFlagged(*t, keys, kDramMetaCleaning | kDramMetaHold)) {
    if (AnyFlagged(*t, keys, kDramMetaHold)) insert_waits_.fetch_add(1, std::memory_order_relaxed);
    state_cv_.Wait(&mu_);
  }
  for (Key key : keys) {
    uint32_t slot = FindSlot(*t, key);
    if (slot != kDramNoSlot && (Meta(t->pos, slot) & kDramMetaPinned) != 0) {
      return Status::FailedPrecondition("dram cache Erase of " + t->Name() + ": key " +
                                        std::to_string(key) + " is pinned");
    }
  }
  for (Key key : keys) {
    uint32_t slot = FindSlot(*t, key);
    if (slot != kDramNoSlot) Release({t->pos, slot});
  }
  GiveBackLocked();
  return Status::Ok();
}

Status DramShard::BeginMoveUp(TableId table, std::span<const Key> keys, MoveUp* move) {
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "BeginMoveUp"));
  move->pinned.assign(keys.size(), 0);
  move->bytes = 0;
  STRATA_RETURN_IF_ERROR(Pin(*t, keys, move->pinned));
  base::MutexLock lock(&mu_);
  const uint64_t rb = t->spec.row_bytes;
  for (uint8_t pinned : move->pinned) {
    if (pinned == 0 || leaving_bytes_ + rb > transit_bytes_max_) continue;
    leaving_bytes_ += rb;
    move->bytes += rb;
  }
  return Status::Ok();
}

Status DramShard::EndMoveUp(TableId table, std::span<const Key> keys, MoveUp* move, bool moved) {
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "EndMoveUp"));
  if (move->pinned.size() != keys.size()) {
    return Status::InvalidArgument("dram cache EndMoveUp of " + t->Name() + ": " +
                                   std::to_string(keys.size()) + " keys, BeginMoveUp had " +
                                   std::to_string(move->pinned.size()));
  }
  std::vector<Key> pinned;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (move->pinned[i] != 0) pinned.push_back(keys[i]);
  }
  base::MutexLock lock(&mu_);
  leaving_bytes_ -= std::min(leaving_bytes_, move->bytes);
  move->bytes = 0;
  move->pinned.clear();
  // Unpinned and erased under one hold of the lock, so no Insert can evict
  // (and write back) a leaving row in between. A row being cleaned stays
  // until its write is done, as in Erase.
  if (moved) {
    while (AnyFlagged(*t, pinned, kDramMetaCleaning | kDramMetaHold)) {
      if (AnyFlagged(*t, pinned, kDramMetaHold)) {
        insert_waits_.fetch_add(1, std::memory_order_relaxed);
      }
      state_cv_.Wait(&mu_);
    }
  }
  std::unordered_map<uint32_t, uint32_t>& pins = slots_[t->pos].pins;
  Status status = Status::Ok();
  for (Key key : pinned) {
    const uint32_t slot = FindSlot(*t, key);
    auto it = slot == kDramNoSlot ? pins.end() : pins.find(slot);
    if (it == pins.end()) {
      status = Status::Internal("dram cache EndMoveUp of " + t->Name() + ": key " +
                                std::to_string(key) + " lost the pin BeginMoveUp gave it");
      continue;
    }
    if (--it->second > 0) {
      // Pinned by another caller too: it stays (and, moved, is a stale copy).
      if (moved) {
        status = Status::FailedPrecondition("dram cache EndMoveUp of " + t->Name() + ": key " +
                                            std::to_string(key) + " is pinned by another caller");
      }
      continue;
    }
    pins.erase(it);
    Meta(t->pos, slot) &= ~kDramMetaPinned;
    if (moved) {
      Release({t->pos, slot});
    } else {
      File(t->pos, slot);
    }
  }
  GiveBackLocked();
  return status;
}

Status DramShard::FlushDirty() {
  // No CleanAhead in flight (it holds clean_mu_ throughout), so no older copy
  // of a row is being written while this writes the newest.
  base::MutexLock clean_lock(&clean_mu_);
  base::MutexLock lock(&mu_);
  WaitInsertsDone();  // no row is being written or written back meanwhile
  for (const auto& t : tables_) {
    const uint32_t rb = t->spec.row_bytes;
    std::vector<uint32_t> slots;
    for (uint64_t slot = 0; slot < slots_[t->pos].touched; ++slot) {
      const uint32_t meta = Meta(t->pos, static_cast<uint32_t>(slot));
      if ((meta & kDramMetaOccupied) != 0 && (meta & kDramMetaDirty) != 0) {
        slots.push_back(static_cast<uint32_t>(slot));
      }
    }
    if (!slots.empty() && backing_ == nullptr) {
      return Status::FailedPrecondition("dram cache FlushDirty: " + std::to_string(slots.size()) +
                                        " dirty rows of " + t->Name() + " and no backing store");
    }
    std::vector<Key> keys;
    std::vector<std::byte> rows;
    for (size_t begin = 0; begin < slots.size(); begin += kDramFlushBatchRowsMax) {
      const size_t end = std::min(slots.size(), begin + kDramFlushBatchRowsMax);
      keys.clear();
      rows.resize((end - begin) * rb);
      for (size_t j = begin; j < end; ++j) {
        keys.push_back(t->KeyAt(slots[j]));
        std::memcpy(rows.data() + (j - begin) * rb, t->Row(slots[j]), rb);
      }
      Status s = backing_->MultiPut(t->spec.id, keys, rows);
      if (!s.ok()) {
        writeback_errors_.fetch_add(1, std::memory_order_relaxed);
        return s.WithContext("dram cache FlushDirty of " + t->Name());
      }
      for (size_t j = begin; j < end; ++j) SetDirtyLocked(*t, slots[j], false);
      dirty_writebacks_.fetch_add(end - begin, std::memory_order_relaxed);
    }
  }
  return Status::Ok();
}

void DramShard::PlanClean(uint64_t window_rows, uint64_t flagged) {
  clean_plan_.clear();
  clean_next_ = 0;
  clean_window_ = window_rows;
  clean_evictions_ = evictions_.load(std::memory_order_relaxed);
  clean_plans_.fetch_add(1, std::memory_order_relaxed);
  // Nearest eviction first: larger codes first, then slot order.
  auto nearer = [](const QueueEntry& a, const QueueEntry& b) {
    if (a.code != b.code) return a.code > b.code;
    return a.table != b.table ? a.table < b.table : a.slot < b.slot;
  };
  // Kept to the nearest clean_plan_rows_max_ as the pass goes (cut back
  // whenever it reaches twice that), so it never holds a whole window.
  const uint64_t keep = clean_plan_rows_max_;
  uint32_t min_code = 0;
  uint64_t take = 0, count = 0;
  // The rows this call flagged already are victims-to-be of the window but
  // no longer evictable, so Threshold does not count them.
  if (flagged < window_rows && Threshold(window_rows - flagged, &min_code, &take, &count)) {
    for (const auto& t : tables_) {
      const TableSlots& ts = slots_[t->pos];
      for (uint64_t s = 0; s < ts.touched; ++s) {
        const uint32_t meta = ts.meta[s];
        if (!Evictable(meta) || DramMetaCode(meta) < min_code) continue;
        if (DramMetaCode(meta) == min_code) {
          if (take == 0) continue;
          --take;
        }
        if ((meta & kDramMetaDirty) != 0) {
          // Grown straight to its bound, not by doubling past it.
          if (clean_plan_.size() == clean_plan_.capacity()) {
            clean_plan_.reserve(std::min<uint64_t>(2 * keep, 2 * clean_plan_.size() + 64));
          }
          clean_plan_.push_back({DramMetaCode(meta), t->pos, static_cast<uint32_t>(s)});
          if (clean_plan_.size() >= 2 * keep) KeepFirst(clean_plan_, keep, nearer);
        }
      }
    }
  }
  KeepFirst(clean_plan_, keep, nearer);
  std::sort(clean_plan_.begin(), clean_plan_.end(), nearer);
  clean_plan_bytes_.store(clean_plan_.capacity() * sizeof(QueueEntry), std::memory_order_relaxed);
}

Result<uint64_t> DramShard::CleanAhead(uint64_t window_rows, uint64_t rows_max) {
  if (backing_ == nullptr || window_rows == 0 || rows_max == 0) return uint64_t{0};
  base::MutexLock clean_lock(&clean_mu_);
  struct Copy {
    uint32_t slot;
    Key key;
  };
  // Per table: the slots taken, their keys, and their bytes as copied.
  std::vector<std::vector<Copy>> copies(tables_.size());
  std::vector<std::vector<std::byte>> bytes(tables_.size());
  uint64_t taken = 0;
  {
    base::MutexLock lock(&mu_);
    // An Insert waiting for room needs the next victims to stay victims.
    if (room_waiters_ > 0) return uint64_t{0};
    // The next rows of the plan that are still dirty victims-to-be with the
    // code they were planned with; a plan with none left is made again
    // (once per call), and so is one for another window or one the
    // evictions since have moved past.
    bool planned = false;
    if (clean_window_ != window_rows ||
        evictions_.load(std::memory_order_relaxed) - clean_evictions_ > window_rows / 2) {
      PlanClean(window_rows, 0);
      planned = true;
    }
    std::vector<QueueEntry> picked;
    while (true) {
      for (; clean_next_ < clean_plan_.size() && picked.size() < rows_max; ++clean_next_) {
        const QueueEntry& e = clean_plan_[clean_next_];
        uint32_t& meta = Meta(e.table, e.slot);
        // A code at least the planned one is as near eviction or nearer (a
        // later next use, or a slot reused since by another dirty row of
        // such a code, which is written instead: as good); a lower one may
        // have left the window.
        if (Evictable(meta) && (meta & kDramMetaDirty) != 0 && DramMetaCode(meta) >= e.code) {
          // Not a victim while its copy is written (nor planned again).
          meta |= kDramMetaCleaning;
          picked.push_back(e);
        }
      }
      if (picked.size() == rows_max || planned) break;
      PlanClean(window_rows, picked.size());
      planned = true;
    }
    taken = picked.size();
    for (const QueueEntry& v : picked) {
      Table& t = *tables_[v.table];
      const uint32_t rb = t.spec.row_bytes;
      copies[v.table].push_back({v.slot, t.KeyAt(v.slot)});
      const size_t at = bytes[v.table].size();
      bytes[v.table].resize(at + rb);
      std::memcpy(bytes[v.table].data() + at, t.Row(v.slot), rb);
    }
    cleaning_rows_ += taken;
  }
  if (taken == 0) return uint64_t{0};

  Status first_error;
  std::vector<uint8_t> written(tables_.size(), 0);
  std::vector<Key> keys;
  for (size_t ti = 0; ti < tables_.size() && first_error.ok(); ++ti) {
    if (copies[ti].empty()) continue;
    keys.clear();
    for (const Copy& c : copies[ti]) keys.push_back(c.key);
    Status s = backing_->MultiPut(tables_[ti]->spec.id, keys, bytes[ti]);
    if (!s.ok()) {
      // The plan is past these rows, which stay dirty: the next call plans
      // again, so they are the first it writes.
      clean_window_ = 0;
      writeback_errors_.fetch_add(1, std::memory_order_relaxed);
      first_error = s.WithContext("dram cache clean-ahead of " + std::to_string(keys.size()) +
                                  " dirty rows of " + tables_[ti]->Name());
      break;
    }
    written[ti] = 1;
  }

  uint64_t cleaned = 0;
  {
    base::MutexLock lock(&mu_);
    for (size_t ti = 0; ti < tables_.size(); ++ti) {
      Table& t = *tables_[ti];
      const uint32_t rb = t.spec.row_bytes;
      for (size_t i = 0; i < copies[ti].size(); ++i) {
        const Copy& c = copies[ti][i];
        uint32_t& meta = Meta(t.pos, c.slot);
        meta &= ~kDramMetaCleaning;
        // Erase waited for this write, so the slot still holds the key; an
        // Insert that overwrote it meanwhile left it dirty with other bytes,
        // and one overwriting it now (holding it) sets its flag itself.
        STRATA_ASSERT((meta & kDramMetaOccupied) != 0 && t.KeyAt(c.slot) == c.key,
                      "dram cache: a row left while being cleaned");
        if (written[ti] && (meta & kDramMetaHold) == 0 &&
            std::memcmp(t.Row(c.slot), bytes[ti].data() + i * rb, rb) == 0) {
          SetDirtyLocked(t, c.slot, false);
          ++cleaned;
        }
        File(t.pos, c.slot);
      }
    }
    cleaning_rows_ -= taken;
  }
  state_cv_.SignalAll();
  for (size_t ti = 0; ti < tables_.size(); ++ti) {
    if (written[ti]) dirty_writebacks_.fetch_add(copies[ti].size(), std::memory_order_relaxed);
  }
  cleaned_ahead_.fetch_add(cleaned, std::memory_order_relaxed);
  if (!first_error.ok()) return first_error;
  return cleaned;
}

}  // namespace strata::storage
