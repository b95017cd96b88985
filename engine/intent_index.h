// IntentIndex: the planner's picture of the future, from intent signals.
//
// An intent window says: worker w will access these keys of table t while its
// clock is in [start, end). Inactive before start, active inside, expired at
// end; windows may overlap and extend each other. Per key the index keeps its
// unexpired windows in start order (its next intended use is the first one's
// start) and how many of them the planner has acted on (the row stays pinned
// in T0 while that count is positive).
//
// Layout (docs/benchmarks.md, "The intent index", has its sizes): each table's keys sit in a
// flat IntentKeyTable, one 16-byte record per key (the key, its last window,
// its acted count). A window holds one flat array of entries, one per key:
// the key's record number and the id of the key's next window in start order
// (the last one names the first), so a key's windows form a ring from window
// to window and its first window is one step from its last. That is 8 bytes
// per pending (key, window), plus about 25 bytes per key tracked (its record
// and probe slots) and about 80 per window; nothing is allocated per pair.
// A step along a ring finds the key's entry in the next window by binary
// search (entries are sorted by record). NextUse, adding a window at or after
// the key's last start and expiring its first window take one step; a window
// added or expiring out of start order walks the key's ring.
//
// Thread safety: none; owned and used by the planner under the engine's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "engine/intent_key_table.h"
#include "strata/types.h"

namespace strata::engine {

using IntentWindowId = uint32_t;

class IntentWindow {
 public:
  IntentWindowId id = 0;  // reused once the window expired
  WorkerId worker = 0;
  TableId table = 0;
  Clock start = 0;
  Clock end = 0;
  bool acted = false;
  bool deferred = false;  // the planner put it off at least once (pin cap)

  // Distinct keys of the window (IntentIndex::AppendKeys lists them).
  size_t size() const { return entries_.size(); }

 private:
  friend class IntentIndex;
  struct Entry {
    uint32_t record;      // the key's record in its table's IntentKeyTable
    IntentWindowId next;  // the key's next window in start order; the last: the first
  };
  std::vector<Entry> entries_;  // sorted by record, exactly sized
};

class IntentIndex {
 public:
  explicit IntentIndex(size_t num_tables) : tables_(num_tables) {}

  // Adds a window (keys deduplicated here). Returns its id.
  IntentWindowId Add(WorkerId worker, TableId table, std::span<const Key> keys, Clock start,
                     Clock end);

  // The not-yet-acted windows of `worker` with start < act_before, in start
  // order. The caller acts on a prefix and calls MarkActed for each.
  std::vector<IntentWindow*> Due(WorkerId worker, Clock act_before);
  void MarkActed(IntentWindow* window);
  // Appends the window's distinct keys to `out` (in no particular order).
  void AppendKeys(const IntentWindow& window, std::vector<Key>* out) const;

  // Removes the windows of `worker` with end <= clock. For every key whose
  // acted count drops to zero, calls unpin(table, key); for every key touched,
  // calls next_use(table, key, NextUse(table, key)) afterwards.
  void Expire(WorkerId worker, Clock clock, const std::function<void(TableId, Key)>& unpin,
              const std::function<void(TableId, Key, Clock)>& next_use);

  // Smallest start among the key's unexpired windows; kClockNever if none.
  Clock NextUse(TableId table, Key key) const;
  // Acted-and-unexpired windows holding the key.
  uint32_t ActedCount(TableId table, Key key) const;
  size_t PendingWindows() const { return windows_.size() - free_windows_.size(); }
  size_t TrackedKeys() const;
  // (key, window) pairs of the unexpired windows.
  size_t PendingPairs() const { return pairs_; }
  // Heap bytes the index holds, by capacity: the windows (objects and
  // entry arrays), the id arrays (per-worker orders, free ids) and the key
  // tables.
  size_t MemoryBytes() const;

 private:
  static constexpr uint32_t kNone = IntentKeyTable::kNone;
  // Window ids of one worker sorted by one of their clocks (ties: in the
  // order added), in a flat array; ids taken from the front only advance
  // `first_`, so the usual order of work (add at the back, act on and expire
  // from the front) moves nothing.
  class WindowOrder {
   public:
    // `clock` gives an id's clock.
    template <class ClockOf>
    void Insert(IntentWindowId id, ClockOf clock);
    template <class ClockOf>
    void Erase(IntentWindowId id, ClockOf clock);
    const IntentWindowId* begin() const { return ids_.data() + first_; }
    const IntentWindowId* end() const { return ids_.data() + ids_.size(); }
    bool empty() const { return first_ == ids_.size(); }
    size_t MemoryBytes() const { return ids_.capacity() * sizeof(IntentWindowId); }

   private:
    std::vector<IntentWindowId> ids_;
    size_t first_ = 0;
  };
  struct WorkerWindows {
    WindowOrder pending_by_start;  // not acted
    WindowOrder by_end;            // every unexpired window
  };

  WorkerWindows& Worker(WorkerId worker);
  // The key's entry in window `id`. REQUIRES: it has one.
  IntentWindow::Entry& EntryOf(IntentWindowId id, uint32_t record);
  const IntentWindow::Entry& EntryOf(IntentWindowId id, uint32_t record) const;
  // Links entry `pos` of the new window `id` into its key's ring by start.
  void Link(IntentKeyTable::Links& links, IntentWindowId id, size_t pos);
  // Takes the expiring window `id` out of its key's ring.
  void Unlink(IntentKeyTable::Links& links, IntentWindowId id, size_t pos);
  // The key's first window (nearest start). REQUIRES: the key has one.
  IntentWindowId First(const IntentKeyTable::Links& links, uint32_t record) const {
    return EntryOf(links.tail, record).next;
  }
  Clock StartOf(IntentWindowId id) const { return windows_[id]->start; }
  Clock EndOf(IntentWindowId id) const { return windows_[id]->end; }

  // Heap bytes of a live window: itself and its entries.
  static size_t WindowBytes(const IntentWindow& window);

  size_t window_bytes_ = 0;  // WindowBytes of the live windows
  size_t pairs_ = 0;
  std::vector<std::unique_ptr<IntentWindow>> windows_;  // by id; null: free
  std::vector<IntentWindowId> free_windows_;
  std::vector<WorkerWindows> workers_;
  std::vector<IntentKeyTable> tables_;
  std::vector<uint32_t> scratch_;  // Add's record numbers
};

}  // namespace strata::engine
