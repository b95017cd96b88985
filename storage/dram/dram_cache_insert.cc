// DramCache: Insert (whole or in pieces), Erase, victim selection, write-back and FlushDirty.
#include <algorithm>
#include <bit>
#include <cstring>
#include <mutex>

#include "base/assert.h"
#include "storage/dram/dram_cache.h"
#include "storage/dram/dram_cache_internal.h"
#include "storage/dram/limits.h"

namespace strata::storage {

Status DramCache::SelectVictims(const Table& t, uint64_t bytes_needed,
                                std::vector<Victim>* victims) {
  uint64_t freed = 0;
  while (freed < bytes_needed) {
    Victim v;
    if (!PopVictim(&v)) {
      // The victims popped so far stay; the next pop sweeps them up again.
      for (const Victim& u : *victims) Meta(u.table, u.slot) &= ~kDramMetaHold;
      victims->clear();
      DropQueues();
      return Status::ResourceExhausted(
          "dram cache Insert of " + t.Name() + ": no room for " + std::to_string(bytes_needed) +
          " more row bytes (dram_bytes_max " + std::to_string(options_.dram_bytes_max) + ", used " +
          std::to_string(bytes_used_) +
          "): every other resident row is pinned, or dirty with no backing store");
    }
    Meta(v.table, v.slot) |= kDramMetaHold;  // so a sweep does not pick it again
    victims->push_back(v);
    freed += tables_[v.table]->spec.row_bytes;
  }
  return Status::Ok();
}

Status DramCache::WriteBack(std::vector<Victim>& victims) {
  if (backing_ == nullptr) return Status::Ok();  // dirty rows never became victims
  Status first_error;
  for (const auto& t : tables_) {
    std::vector<Key> keys;
    std::vector<uint32_t> slots;
    for (const Victim& v : victims) {
      if (v.table != t->pos || (Meta(t->pos, v.slot) & kDramMetaDirty) == 0) continue;
      keys.push_back(t->KeyAt(v.slot));
      slots.push_back(v.slot);
    }
    if (keys.empty()) continue;
    const uint32_t rb = t->spec.row_bytes;
    std::vector<std::byte> rows(keys.size() * rb);
    // Row bytes change only under mu_, which this thread holds.
    for (size_t i = 0; i < slots.size(); ++i) {
      std::memcpy(rows.data() + i * rb, t->Row(slots[i]), rb);
    }
    Status s = backing_->MultiPut(t->spec.id, keys, rows);
    if (!s.ok()) {
      writeback_errors_.fetch_add(1, std::memory_order_relaxed);
      first_error = s.WithContext("dram cache write-back of " + std::to_string(keys.size()) +
                                  " dirty victims of " + t->Name());
      break;
    }
    for (uint32_t slot : slots) SetDirtyLocked(*t, slot, false, /*file=*/false);
    dirty_writebacks_.fetch_add(keys.size(), std::memory_order_relaxed);
  }
  if (!first_error.ok()) {
    // The victims stay: written ones now clean, the others still dirty; the
    // next pop sweeps them up again.
    for (const Victim& v : victims) Meta(v.table, v.slot) &= ~kDramMetaHold;
    victims.clear();
    DropQueues();
  }
  return first_error;
}

void DramCache::Release(const Victim& v) {
  Release(v, DramKeyHash(tables_[v.table]->KeyAt(v.slot)));
}

void DramCache::Release(const Victim& v, uint64_t hash) {
  Table& t = *tables_[v.table];
  {
    DramIndex::Stripe& stripe = t.index->stripe(t.index->StripeOf(hash));
    base::WriterLock lock(&stripe.mu);
    bool erased = stripe.map.Erase(hash, v.slot);
    STRATA_ASSERT(erased, "dram cache: released row missing from the index");
  }
  uint32_t& meta = Meta(t.pos, v.slot);
  if ((meta & kDramMetaPinned) != 0) slots_[t.pos].pins.erase(v.slot);
  meta = 0;  // any queue entry goes stale
  // Out of the index (no lookup reads the key any more): the key field
  // links the free slots, reused last in, first out.
  t.Header(v.slot).key = slots_[t.pos].free_head;
  slots_[t.pos].free_head = v.slot;
  --rows_;
  bytes_used_ -= t.spec.row_bytes;
}

Status DramCache::MakeRoom(Table& t, std::span<const Key> keys, std::span<const uint32_t> picks,
                           std::span<uint32_t> slots) {
  while (true) {
    // Rows being overwritten are held so they cannot become victims.
    uint64_t new_rows = 0;
    for (size_t k = 0; k < picks.size(); ++k) {
      if (k + kDramPrefetchRows < picks.size())
        t.PrefetchBucket(keys[picks[k + kDramPrefetchRows]]);
      slots[k] = FindSlot(t, keys[picks[k]]);
      if (slots[k] == kDramNoSlot) {
        ++new_rows;
      } else {
        Meta(t.pos, slots[k]) |= kDramMetaHold;
      }
    }
    const uint64_t bytes_new = new_rows * t.spec.row_bytes;
    // Rows moving up still occupy their slots; their bytes are admitted on
    // top of the budget (and resident bytes may be above it after a move up
    // that did not happen: then this Insert evicts down to it).
    const uint64_t limit = options_.dram_bytes_max + leaving_bytes_;
    if (bytes_used_ + bytes_new <= limit) return Status::Ok();
    thread_local std::vector<Victim> victims;  // no allocation once warm
    victims.clear();
    Status s = SelectVictims(t, bytes_used_ + bytes_new - limit, &victims);
    if (s.ok()) s = WriteBack(victims);
    if (s.ok()) {
      // Two passes, so that no prefetch address waits for a load: the
      // victims' keys (their slots' first lines fetched kDramPrefetchRows
      // ahead), then the index erases, each victim's buckets and the rest of
      // its slot (the new rows go there next: for writing) fetched ahead.
      thread_local std::vector<uint64_t> hashes;
      hashes.resize(victims.size());
      for (size_t k = 0; k < victims.size(); ++k) {
        if (k + kDramPrefetchRows < victims.size()) {
          const Victim& w = victims[k + kDramPrefetchRows];
          __builtin_prefetch(tables_[w.table]->rows->Slot(w.slot));
        }
        hashes[k] = DramKeyHash(tables_[victims[k].table]->KeyAt(victims[k].slot));
      }
      for (size_t k = 0; k < victims.size(); ++k) {
        if (k + kDramPrefetchRows < victims.size()) {
          const Victim& w = victims[k + kDramPrefetchRows];
          const Table& wt = *tables_[w.table];
          wt.PrefetchRun(hashes[k + kDramPrefetchRows]);
          const uint32_t slot_bytes = DramSlotBytes(wt.spec.row_bytes);
          const std::byte* line = wt.rows->Slot(w.slot);
          for (uint32_t off = 64; off < std::min<uint32_t>(slot_bytes, 1024); off += 64) {
            __builtin_prefetch(line + off, 1);
          }
        }
        Release(victims[k], hashes[k]);
      }
      evictions_.fetch_add(victims.size(), std::memory_order_relaxed);
      return Status::Ok();
    }
    for (uint32_t slot : slots) {
      if (slot == kDramNoSlot) continue;
      Meta(t.pos, slot) &= ~kDramMetaHold;
      File(t.pos, slot);
    }
    // Rows being cleaned are victims again once their write is done: wait for
    // it (one MultiPut; no new clean starts while an Insert waits), then look
    // again from the start, since other mutations may run meanwhile.
    if (!s.IsResourceExhausted() || cleaning_rows_ == 0) return s;
    room_waits_.fetch_add(1, std::memory_order_relaxed);
    ++room_waiters_;
    while (cleaning_rows_ > 0) clean_cv_.Wait(&mu_);
    --room_waiters_;
  }
}

Status DramCache::Insert(TableId table, std::span<const Key> keys, std::span<const std::byte> rows,
                         std::span<const uint8_t> dirty, std::span<const Clock> next_use) {
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "Insert"));
  const size_t n = keys.size();
  const uint32_t rb = t->spec.row_bytes;
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "Insert", n * rb, rows.size(), "rows (bytes)", false));
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "Insert", n, dirty.size(), "dirty", true));
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "Insert", n, next_use.size(), "next_use", true));
  if (n == 0) return Status::Ok();

  // The last occurrence of each key wins: a per-thread open-addressing set
  // of positions (index + 1, 0 empty) at load at most 1/2.
  thread_local std::vector<uint32_t> last;
  const uint64_t mask = std::bit_ceil(2 * n) - 1;
  last.assign(mask + 1, 0);
  auto position = [&](Key key) -> uint32_t& {
    uint64_t at = DramKeyHash(key) & mask;
    while (last[at] != 0 && keys[last[at] - 1] != key) at = (at + 1) & mask;
    return last[at];
  };
  for (size_t i = 0; i < n; ++i) position(keys[i]) = static_cast<uint32_t>(i + 1);
  thread_local std::vector<uint32_t> picks;  // no allocation once warm
  picks.clear();
  for (size_t i = 0; i < n; ++i) {
    if (position(keys[i]) == i + 1) picks.push_back(static_cast<uint32_t>(i));
  }

  base::MutexLock lock(&mu_);
  thread_local std::vector<uint32_t> slots;
  slots.resize(picks.size());
  STRATA_RETURN_IF_ERROR(MakeRoom(*t, keys, picks, slots));

  for (size_t k = 0; k < picks.size(); ++k) {
    if (k + kDramPrefetchRows < picks.size()) t->PrefetchBucket(keys[picks[k + kDramPrefetchRows]]);
    const uint32_t i = picks[k];
    const std::byte* src = rows.data() + uint64_t{i} * rb;
    const bool is_dirty = !dirty.empty() && dirty[i] != 0;
    const uint32_t code = CodeOf(next_use.empty() ? kClockNever : next_use[i]);
    const uint64_t hash = DramKeyHash(keys[i]);
    DramIndex::Stripe& stripe = t->index->stripe(t->index->StripeOf(hash));
    uint32_t slot = slots[k];
    if (slot != kDramNoSlot) {
      {
        base::WriterLock stripe_lock(&stripe.mu);  // lookups may be copying this row
        std::memcpy(t->Row(slot), src, rb);
        bool found = stripe.map.SetDirty(hash, slot, is_dirty);
        STRATA_ASSERT(found, "dram cache: resident row missing from the index");
      }
      uint32_t& meta = Meta(t->pos, slot);
      meta &= ~(kDramMetaHold | kDramMetaDirty);
      if (is_dirty) meta |= kDramMetaDirty;
    } else {
      slot = AllocateSlot(*t);
      t->Header(slot).key = keys[i];  // unpublished: no reader yet
      std::memcpy(t->Row(slot), src, rb);
      Meta(t->pos, slot) = kDramMetaOccupied | (is_dirty ? kDramMetaDirty : 0u);
      t->index->ReserveOne(t->index->StripeOf(hash));
      {
        base::WriterLock stripe_lock(&stripe.mu);
        stripe.map.Insert(hash, slot, is_dirty);
      }
      ++rows_;
      bytes_used_ += rb;
      inserts_.fetch_add(1, std::memory_order_relaxed);
    }
    SetCode(t->pos, slot, code);
  }
  return Status::Ok();
}

Status DramCache::InsertInPieces(TableId table, std::span<const Key> keys,
                                 std::span<const std::byte> rows, std::span<const uint8_t> dirty,
                                 std::span<const Clock> next_use, uint64_t* placed) {
  *placed = 0;
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "InsertInPieces"));
  const size_t n = keys.size();
  const uint32_t rb = t->spec.row_bytes;
  STRATA_RETURN_IF_ERROR(
      CheckKeySpan(*t, "InsertInPieces", n * rb, rows.size(), "rows (bytes)", false));
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "InsertInPieces", n, dirty.size(), "dirty", true));
  STRATA_RETURN_IF_ERROR(CheckKeySpan(*t, "InsertInPieces", n, next_use.size(), "next_use", true));
  // Pieces of the rows the budget holds (slots_max adds the transit slots).
  const uint64_t piece_max = std::max<uint64_t>(1, options_.dram_bytes_max / rb);
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

bool DramCache::AnyCleaning(const Table& t, std::span<const Key> keys) const {
  for (Key key : keys) {
    uint32_t slot = FindSlot(t, key);
    if (slot != kDramNoSlot && (Meta(t.pos, slot) & kDramMetaCleaning) != 0) return true;
  }
  return false;
}

Status DramCache::Erase(TableId table, std::span<const Key> keys) {
  STRATA_ASSIGN_OR_RETURN(Table * t, FindTable(table, "Erase"));
  base::MutexLock lock(&mu_);
  // A row being cleaned stays until its write is done: released now, the key
  // could come back dirty and be written again, racing the older copy.
  while (AnyCleaning(*t, keys)) clean_cv_.Wait(&mu_);
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
  return Status::Ok();
}

Status DramCache::BeginMoveUp(TableId table, std::span<const Key> keys, MoveUp* move) {
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

Status DramCache::EndMoveUp(TableId table, std::span<const Key> keys, MoveUp* move, bool moved) {
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
    while (AnyCleaning(*t, pinned)) clean_cv_.Wait(&mu_);
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
  return status;
}

Status DramCache::FlushDirty() {
  // No CleanAhead in flight (it holds clean_mu_ throughout), so no older copy
  // of a row is being written while this writes the newest.
  base::MutexLock clean_lock(&clean_mu_);
  base::MutexLock lock(&mu_);
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

Result<uint64_t> DramCache::CleanAhead(uint64_t window_rows, uint64_t rows_max) {
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
    // The dirty rows among the next window_rows victims, nearest first.
    std::vector<QueueEntry> picked;
    uint32_t min_code = 0;
    uint64_t take = 0, count = 0;
    if (Threshold(window_rows, &min_code, &take, &count)) {
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
            picked.push_back({DramMetaCode(meta), t->pos, static_cast<uint32_t>(s)});
          }
        }
      }
    }
    if (picked.size() > rows_max) {
      std::nth_element(picked.begin(), picked.begin() + rows_max, picked.end(),
                       [](const QueueEntry& a, const QueueEntry& b) { return a.code > b.code; });
      picked.resize(rows_max);
    }
    taken = picked.size();
    for (const QueueEntry& v : picked) {
      Table& t = *tables_[v.table];
      Meta(t.pos, v.slot) |= kDramMetaCleaning;  // not a victim while its copy is written
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
        // Insert that overwrote it meanwhile left it dirty with other bytes.
        STRATA_ASSERT((meta & kDramMetaOccupied) != 0 && t.KeyAt(c.slot) == c.key,
                      "dram cache: a row left while being cleaned");
        if (written[ti] && std::memcmp(t.Row(c.slot), bytes[ti].data() + i * rb, rb) == 0) {
          SetDirtyLocked(t, c.slot, false);
          ++cleaned;
        }
        File(t.pos, c.slot);
      }
    }
    cleaning_rows_ -= taken;
  }
  clean_cv_.SignalAll();
  for (size_t ti = 0; ti < tables_.size(); ++ti) {
    if (written[ti]) dirty_writebacks_.fetch_add(copies[ti].size(), std::memory_order_relaxed);
  }
  cleaned_ahead_.fetch_add(cleaned, std::memory_order_relaxed);
  if (!first_error.ok()) return first_error;
  return cleaned;
}

}  // namespace strata::storage
