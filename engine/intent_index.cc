#include "engine/intent_index.h"

#include <algorithm>
#include <utility>

#include "base/assert.h"

namespace strata::engine {

template <class ClockOf>
void IntentIndex::WindowOrder::Insert(IntentWindowId id, ClockOf clock) {
  if (first_ == ids_.size()) {  // empty: start the array over
    ids_.clear();
    first_ = 0;
  }
  const Clock c = clock(id);
  auto it =
      std::upper_bound(ids_.begin() + static_cast<ptrdiff_t>(first_), ids_.end(), c,
                       [&](Clock value, IntentWindowId other) { return value < clock(other); });
  ids_.insert(it, id);
}

template <class ClockOf>
void IntentIndex::WindowOrder::Erase(IntentWindowId id, ClockOf clock) {
  const Clock c = clock(id);
  auto it =
      std::lower_bound(ids_.begin() + static_cast<ptrdiff_t>(first_), ids_.end(), c,
                       [&](IntentWindowId other, Clock value) { return clock(other) < value; });
  while (it != ids_.end() && *it != id) ++it;
  STRATA_ASSERT(it != ids_.end(), "IntentIndex: window missing from its worker's order");
  if (it == ids_.begin() + static_cast<ptrdiff_t>(first_)) {
    ++first_;
    // Give the taken front back once it is most of the array.
    if (first_ > 64 && first_ * 2 > ids_.size()) {
      ids_.erase(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(first_));
      first_ = 0;
    }
  } else {
    ids_.erase(it);
  }
}

IntentIndex::WorkerWindows& IntentIndex::Worker(WorkerId worker) {
  if (worker >= workers_.size()) workers_.resize(worker + 1);
  return workers_[worker];
}

const IntentWindow::Entry& IntentIndex::EntryOf(IntentWindowId id, uint32_t record) const {
  const auto& entries = windows_[id]->entries_;
  auto it = std::lower_bound(entries.begin(), entries.end(), record,
                             [](const IntentWindow::Entry& e, uint32_t r) { return e.record < r; });
  STRATA_ASSERT(it != entries.end() && it->record == record,
                "IntentIndex: key missing from a window of its ring");
  return *it;
}

IntentWindow::Entry& IntentIndex::EntryOf(IntentWindowId id, uint32_t record) {
  return const_cast<IntentWindow::Entry&>(std::as_const(*this).EntryOf(id, record));
}

IntentWindowId IntentIndex::Add(WorkerId worker, TableId table, std::span<const Key> keys,
                                Clock start, Clock end) {
  STRATA_ASSERT(table < tables_.size(), "IntentIndex::Add: table out of range");
  STRATA_ASSERT(start < end, "IntentIndex::Add: empty window");
  IntentKeyTable& key_table = tables_[table];
  scratch_.clear();
  for (Key key : keys) scratch_.push_back(key_table.FindOrAdd(key));
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());

  IntentWindowId id;
  if (!free_windows_.empty()) {
    id = free_windows_.back();
    free_windows_.pop_back();
  } else {
    STRATA_ASSERT(windows_.size() < kNone, "IntentIndex: window ids exhausted");
    id = static_cast<IntentWindowId>(windows_.size());
    windows_.emplace_back();
  }
  windows_[id] = std::make_unique<IntentWindow>();
  IntentWindow& window = *windows_[id];
  window.id = id;
  window.worker = worker;
  window.table = table;
  window.start = start;
  window.end = end;
  window.entries_.resize(scratch_.size());  // exact: the capacity is counted
  for (size_t i = 0; i < scratch_.size(); ++i) window.entries_[i] = {scratch_[i], kNone};
  for (size_t i = 0; i < scratch_.size(); ++i) Link(key_table.links(scratch_[i]), id, i);

  pairs_ += window.entries_.size();
  window_bytes_ += WindowBytes(window);
  WorkerWindows& ww = Worker(worker);
  ww.pending_by_start.Insert(id, [this](IntentWindowId w) { return StartOf(w); });
  ww.by_end.Insert(id, [this](IntentWindowId w) { return EndOf(w); });
  return id;
}

void IntentIndex::Link(IntentKeyTable::Links& links, IntentWindowId id, size_t pos) {
  IntentWindow::Entry& entry = windows_[id]->entries_[pos];
  const Clock start = StartOf(id);
  if (links.tail == kNone) {  // the key's only window: a ring of one
    entry.next = id;
    links.tail = id;
    return;
  }
  IntentWindow::Entry& last = EntryOf(links.tail, entry.record);
  const IntentWindowId first = last.next;
  if (StartOf(links.tail) <= start || start < StartOf(first)) {
    // The usual case, after the last window (the new last), or before the
    // first (the new first): between the two either way.
    entry.next = first;
    last.next = id;
    if (StartOf(links.tail) <= start) links.tail = id;
    return;
  }
  // After the last window starting at or before `start`; it is not the last.
  for (IntentWindowId prev = first;;) {
    IntentWindow::Entry& e = EntryOf(prev, entry.record);
    if (start < StartOf(e.next)) {
      entry.next = e.next;
      e.next = id;
      return;
    }
    prev = e.next;
  }
}

void IntentIndex::Unlink(IntentKeyTable::Links& links, IntentWindowId id, size_t pos) {
  const IntentWindow::Entry gone = windows_[id]->entries_[pos];
  if (gone.next == id) {  // its only window
    STRATA_ASSERT(links.tail == id, "IntentIndex: a ring of one is not its key's last");
    links.tail = kNone;
    return;
  }
  // The entry linking to `id`: the last's when `id` is the first (the usual
  // case: the nearest window expires first), else found along the ring.
  IntentWindowId prev = links.tail;
  for (size_t steps = 0;; ++steps) {
    STRATA_ASSERT(steps <= windows_.size(), "IntentIndex: window missing from its key's ring");
    IntentWindow::Entry& e = EntryOf(prev, gone.record);
    if (e.next == id) {
      e.next = gone.next;
      if (links.tail == id) links.tail = prev;
      return;
    }
    prev = e.next;
  }
}

std::vector<IntentWindow*> IntentIndex::Due(WorkerId worker, Clock act_before) {
  std::vector<IntentWindow*> out;
  for (IntentWindowId id : Worker(worker).pending_by_start) {
    if (StartOf(id) >= act_before) break;
    out.push_back(windows_[id].get());
  }
  return out;
}

void IntentIndex::MarkActed(IntentWindow* window) {
  STRATA_ASSERT(!window->acted, "IntentIndex::MarkActed twice");
  Worker(window->worker).pending_by_start.Erase(window->id, [this](IntentWindowId w) {
    return StartOf(w);
  });
  window->acted = true;
  IntentKeyTable& key_table = tables_[window->table];
  for (const IntentWindow::Entry& e : window->entries_) key_table.links(e.record).acted++;
}

void IntentIndex::AppendKeys(const IntentWindow& window, std::vector<Key>* out) const {
  const IntentKeyTable& key_table = tables_[window.table];
  for (const IntentWindow::Entry& e : window.entries_) out->push_back(key_table.key(e.record));
}

void IntentIndex::Expire(WorkerId worker, Clock clock,
                         const std::function<void(TableId, Key)>& unpin,
                         const std::function<void(TableId, Key, Clock)>& next_use) {
  WorkerWindows& ww = Worker(worker);
  while (!ww.by_end.empty() && EndOf(*ww.by_end.begin()) <= clock) {
    const IntentWindowId id = *ww.by_end.begin();
    IntentWindow* window = windows_[id].get();
    ww.by_end.Erase(id, [this](IntentWindowId w) { return EndOf(w); });
    if (!window->acted) {
      ww.pending_by_start.Erase(id, [this](IntentWindowId w) { return StartOf(w); });
    }
    const TableId table = window->table;
    IntentKeyTable& key_table = tables_[table];
    for (size_t pos = 0; pos < window->entries_.size(); ++pos) {
      const uint32_t record = window->entries_[pos].record;
      IntentKeyTable::Links& links = key_table.links(record);
      Unlink(links, id, pos);
      --pairs_;
      const Key key = key_table.key(record);
      if (window->acted) {
        STRATA_ASSERT(links.acted > 0, "IntentIndex: acted count underflow");
        if (--links.acted == 0) unpin(table, key);
      }
      Clock next = kClockNever;
      if (links.tail != kNone) {
        next = StartOf(First(links, record));
      } else {
        STRATA_ASSERT(links.acted == 0, "IntentIndex: acted count without a window");
        key_table.Erase(record);
      }
      next_use(table, key, next);
    }
    window_bytes_ -= WindowBytes(*window);
    windows_[id].reset();
    free_windows_.push_back(id);
  }
}

size_t IntentIndex::WindowBytes(const IntentWindow& window) {
  return sizeof(IntentWindow) + window.entries_.capacity() * sizeof(IntentWindow::Entry);
}

size_t IntentIndex::MemoryBytes() const {
  size_t bytes = window_bytes_ + windows_.capacity() * sizeof(windows_[0]) +
                 free_windows_.capacity() * sizeof(IntentWindowId) +
                 workers_.capacity() * sizeof(WorkerWindows) +
                 tables_.capacity() * sizeof(IntentKeyTable) +
                 scratch_.capacity() * sizeof(uint32_t);
  for (const WorkerWindows& ww : workers_) {
    bytes += ww.pending_by_start.MemoryBytes() + ww.by_end.MemoryBytes();
  }
  for (const IntentKeyTable& t : tables_) bytes += t.MemoryBytes();
  return bytes;
}

Clock IntentIndex::NextUse(TableId table, Key key) const {
  const IntentKeyTable& key_table = tables_[table];
  const uint32_t record = key_table.Find(key);
  if (record == kNone) return kClockNever;
  return StartOf(First(key_table.links(record), record));
}

uint32_t IntentIndex::ActedCount(TableId table, Key key) const {
  const IntentKeyTable& key_table = tables_[table];
  const uint32_t record = key_table.Find(key);
  return record == kNone ? 0 : key_table.links(record).acted;
}

size_t IntentIndex::TrackedKeys() const {
  size_t n = 0;
  for (const IntentKeyTable& t : tables_) n += t.size();
  return n;
}

}  // namespace strata::engine
