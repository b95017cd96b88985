// DramCache: Insert (whole or in pieces), Erase, victim selection, write-back and FlushDirty.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "base/assert.h"
#include "storage/dram/dram_cache.h"
#include "storage/dram/dram_cache_internal.h"
#include "storage/dram/limits.h"

namespace strata::storage {

Status DramCache::SelectVictims(const Table& t, uint64_t bytes_needed,
                                std::vector<Victim>* victims) {
  uint64_t freed = 0, refiled = 0;
  while (freed < bytes_needed) {
    if (order_.empty()) {
      for (const Victim& v : *victims) OrderAdd(v.table, v.slot);
      victims->clear();
      return Status::ResourceExhausted(
          "dram cache Insert of " + t.Name() + ": no room for " + std::to_string(bytes_needed) +
          " more row bytes (dram_bytes_max " + std::to_string(options_.dram_bytes_max) + ", used " +
          std::to_string(bytes_used_) +
          "): every other resident row is pinned, or dirty with no backing store");
    }
    const OrderEntry e = *order_.begin();
    // Lookups bump tick (and freq) without mu_, which only moves a row later
    // in the order; an entry whose use counters moved is re-filed first.
    OrderRemove(e.table, e.slot);
    if (OrderOf(e.table, e.slot) != e) {
      OrderAdd(e.table, e.slot);
      // Lookups touched many rows since the last rebuild (a quarter of the
      // order or more): one sorted rebuild re-files them all for less than
      // re-filing them one by one, and costs at most 4 sorted entries per hit.
      if (++refiled > kDramRefilesBeforeRebuildMin &&
          hits_.load(std::memory_order_relaxed) - hits_at_rebuild_ > order_.size() / 4) {
        RebuildOrder();
        refiled = 0;
      }
      continue;
    }
    victims->push_back({e.table, e.slot});
    freed += tables_[e.table]->spec.row_bytes;
  }
  return Status::Ok();
}

void DramCache::RebuildOrder() {
  // Every entry under its current values, sorted in one cache-friendly pass,
  // then appended at the end of a fresh tree (amortised O(1) per entry).
  hits_at_rebuild_ = hits_.load(std::memory_order_relaxed);
  std::vector<OrderEntry> entries;
  entries.reserve(order_.size());
  for (const OrderEntry& e : order_) entries.push_back(OrderOf(e.table, e.slot));
  std::sort(entries.begin(), entries.end());
  order_.clear();
  for (const OrderEntry& e : entries) {
    Meta(e.table, e.slot).order_pos = order_.emplace_hint(order_.end(), e);
  }
}

Status DramCache::WriteBack(std::vector<Victim>& victims) {
  if (backing_ == nullptr) return Status::Ok();  // dirty rows never became victims
  Status first_error;
  for (const auto& t : tables_) {
    std::vector<Key> keys;
    std::vector<uint32_t> slots;
    for (const Victim& v : victims) {
      if (v.table != t->pos || !t->Header(v.slot).dirty.load(std::memory_order_relaxed)) continue;
      keys.push_back(Meta(t->pos, v.slot).key);
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
    for (uint32_t slot : slots) t->Header(slot).dirty.store(0, std::memory_order_relaxed);
    dirty_writebacks_.fetch_add(keys.size(), std::memory_order_relaxed);
  }
  if (!first_error.ok()) {
    // The victims stay: written ones now clean, the others still dirty.
    for (const Victim& v : victims) OrderAdd(v.table, v.slot);
    victims.clear();
  }
  return first_error;
}

void DramCache::Release(const Victim& v) {
  Table& t = *tables_[v.table];
  SlotMeta& m = Meta(t.pos, v.slot);
  if (m.in_order) OrderRemove(v.table, v.slot);
  const uint64_t hash = DramKeyHash(m.key);
  {
    DramIndex::Stripe& stripe = t.index->stripe(t.index->StripeOf(hash));
    base::WriterLock lock(&stripe.mu);
    bool erased = stripe.map.Erase(m.key, hash);
    STRATA_ASSERT(erased, "dram cache: released row missing from the index");
  }
  m.occupied = 0;
  m.pins = 0;
  slots_[t.pos].free.push_back(v.slot);
  --rows_;
  bytes_used_ -= t.spec.row_bytes;
}

Status DramCache::MakeRoom(Table& t, std::span<const Key> keys, std::span<const uint32_t> picks,
                           std::span<uint32_t> slots) {
  while (true) {
    // Rows being overwritten leave the order so they cannot become victims.
    uint64_t new_rows = 0;
    for (size_t k = 0; k < picks.size(); ++k) {
      slots[k] = FindSlot(t, keys[picks[k]]);
      if (slots[k] == kDramNoSlot) {
        ++new_rows;
      } else if (Meta(t.pos, slots[k]).in_order) {
        OrderRemove(t.pos, slots[k]);
      }
    }
    const uint64_t bytes_new = new_rows * t.spec.row_bytes;
    const uint64_t bytes_free = options_.dram_bytes_max - bytes_used_;
    if (bytes_new <= bytes_free) return Status::Ok();
    std::vector<Victim> victims;
    Status s = SelectVictims(t, bytes_new - bytes_free, &victims);
    if (s.ok()) s = WriteBack(victims);
    if (s.ok()) {
      for (const Victim& v : victims) Release(v);
      evictions_.fetch_add(victims.size(), std::memory_order_relaxed);
      return Status::Ok();
    }
    for (uint32_t slot : slots) {
      if (slot != kDramNoSlot) OrderSync(t.pos, slot);
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

  // The last occurrence of each key wins; picks keep input order for ticks.
  std::unordered_map<Key, uint32_t> last;
  last.reserve(n);
  for (size_t i = 0; i < n; ++i) last[keys[i]] = static_cast<uint32_t>(i);
  std::vector<uint32_t> picks;
  picks.reserve(last.size());
  for (size_t i = 0; i < n; ++i) {
    if (last[keys[i]] == i) picks.push_back(static_cast<uint32_t>(i));
  }

  base::MutexLock lock(&mu_);
  std::vector<uint32_t> slots(picks.size());
  STRATA_RETURN_IF_ERROR(MakeRoom(*t, keys, picks, slots));

  const uint64_t tick_base = tick_.fetch_add(picks.size(), std::memory_order_relaxed);
  for (size_t k = 0; k < picks.size(); ++k) {
    const uint32_t i = picks[k];
    const std::byte* src = rows.data() + uint64_t{i} * rb;
    const uint8_t is_dirty = !dirty.empty() && dirty[i] != 0;
    const uint64_t hash = DramKeyHash(keys[i]);
    DramIndex::Stripe& stripe = t->index->stripe(t->index->StripeOf(hash));
    uint32_t slot = slots[k];
    if (slot != kDramNoSlot) {
      base::WriterLock stripe_lock(&stripe.mu);  // lookups may be copying this row
      std::memcpy(t->Row(slot), src, rb);
      t->Header(slot).dirty.store(is_dirty, std::memory_order_relaxed);
    } else {
      slot = AllocateSlot(*t);
      std::memcpy(t->Row(slot), src, rb);  // unpublished: no reader yet
      SlotMeta& m = Meta(t->pos, slot);
      m.key = keys[i];
      m.pins = 0;
      m.occupied = 1;
      m.in_order = 0;
      t->Header(slot).freq.store(0, std::memory_order_relaxed);
      t->Header(slot).dirty.store(is_dirty, std::memory_order_relaxed);
      {
        base::WriterLock stripe_lock(&stripe.mu);
        stripe.map.Insert(keys[i], hash, slot);
      }
      ++rows_;
      bytes_used_ += rb;
      inserts_.fetch_add(1, std::memory_order_relaxed);
    }
    SlotMeta& m = Meta(t->pos, slot);
    m.next_use = next_use.empty() ? kClockNever : next_use[i];
    t->Header(slot).tick.store(tick_base + k, std::memory_order_relaxed);
    t->Header(slot).freq.fetch_add(1, std::memory_order_relaxed);
    OrderSync(t->pos, slot);
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
  while (*placed < n) {
    const uint64_t at = *placed;
    const uint64_t m = std::min<uint64_t>(t->slots_max, n - at);
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
    if (slot != kDramNoSlot && Meta(t.pos, slot).cleaning) return true;
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
    if (slot != kDramNoSlot && Meta(t->pos, slot).pins > 0) {
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

Status DramCache::FlushDirty() {
  // No CleanAhead in flight (it holds clean_mu_ throughout), so no older copy
  // of a row is being written while this writes the newest.
  base::MutexLock clean_lock(&clean_mu_);
  base::MutexLock lock(&mu_);
  for (const auto& t : tables_) {
    const uint32_t rb = t->spec.row_bytes;
    std::vector<uint32_t> slots;
    for (uint64_t slot = 0; slot < slots_[t->pos].touched; ++slot) {
      const SlotMeta& m = Meta(t->pos, static_cast<uint32_t>(slot));
      if (m.occupied &&
          t->Header(static_cast<uint32_t>(slot)).dirty.load(std::memory_order_relaxed)) {
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
        keys.push_back(Meta(t->pos, slots[j]).key);
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
    std::vector<Victim> picked;
    uint64_t seen = 0;
    for (auto it = order_.begin(); it != order_.end() && seen < window_rows && taken < rows_max;
         ++it, ++seen) {
      const Table& t = *tables_[it->table];
      if (t.Header(it->slot).dirty.load(std::memory_order_relaxed)) {
        picked.push_back({it->table, it->slot});
        ++taken;
      }
    }
    for (const Victim& v : picked) {
      Table& t = *tables_[v.table];
      SlotMeta& m = Meta(t.pos, v.slot);
      m.cleaning = 1;
      OrderSync(v.table, v.slot);  // not a victim while its copy is written
      const uint32_t rb = t.spec.row_bytes;
      copies[v.table].push_back({v.slot, m.key});
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
        SlotMeta& m = Meta(t.pos, c.slot);
        m.cleaning = 0;
        // Erase waited for this write, so the slot still holds the key; an
        // Insert that overwrote it meanwhile left it dirty with other bytes.
        STRATA_ASSERT(m.occupied && m.key == c.key, "dram cache: a row left while being cleaned");
        if (written[ti] && std::memcmp(t.Row(c.slot), bytes[ti].data() + i * rb, rb) == 0) {
          t.Header(c.slot).dirty.store(0, std::memory_order_relaxed);
          ++cleaned;
        }
        OrderSync(t.pos, c.slot);
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
