// IntentIndex: the planner's picture of the future, from intent signals.
//
// An intent window says: worker w will access these keys of table t while its
// clock is in [start, end). Inactive before start, active inside, expired at
// end; windows may overlap and extend each other. Per key the index keeps the
// starts of its unexpired windows (its next intended use is the smallest) and
// how many of them the planner has acted on (the row stays pinned in T0 while
// that count is positive).
//
// Thread safety: none; owned and used by the planner under the engine's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "strata/types.h"

namespace strata::engine {

struct IntentWindow {
  uint64_t id = 0;
  WorkerId worker = 0;
  TableId table = 0;
  Clock start = 0;
  Clock end = 0;
  bool acted = false;
  bool deferred = false;  // the planner put it off at least once (pin cap)
  std::vector<Key> keys;  // unique within the window
};

class IntentIndex {
 public:
  explicit IntentIndex(size_t num_tables) : keys_(num_tables) {}

  // Adds a window (keys deduplicated here). Returns its id.
  uint64_t Add(WorkerId worker, TableId table, std::span<const Key> keys, Clock start, Clock end);

  // The not-yet-acted windows of `worker` with start < act_before, in start
  // order. The caller acts on a prefix and calls MarkActed for each.
  std::vector<IntentWindow*> Due(WorkerId worker, Clock act_before);
  void MarkActed(IntentWindow* window);

  // Removes the windows of `worker` with end <= clock. For every key whose
  // acted count drops to zero, calls unpin(table, key); for every key touched,
  // calls next_use(table, key, NextUse(table, key)) afterwards.
  void Expire(WorkerId worker, Clock clock, const std::function<void(TableId, Key)>& unpin,
              const std::function<void(TableId, Key, Clock)>& next_use);

  // Smallest start among the key's unexpired windows; kClockNever if none.
  Clock NextUse(TableId table, Key key) const;
  // Acted-and-unexpired windows holding the key.
  uint32_t ActedCount(TableId table, Key key) const;
  // The window with this id; null once expired.
  IntentWindow* Window(uint64_t id) {
    auto it = windows_.find(id);
    return it == windows_.end() ? nullptr : it->second.get();
  }
  size_t PendingWindows() const { return windows_.size(); }
  size_t TrackedKeys() const;
  // (key, window) pairs of the unexpired windows.
  size_t PendingPairs() const { return pairs_; }
  // Heap bytes the index holds: its windows, their keys, the per-worker
  // orders and the per-key states, with the containers' node and bucket
  // overheads (libstdc++'s layouts).
  size_t MemoryBytes() const;

 private:
  struct KeyState {
    uint32_t acted = 0;
    std::vector<Clock> starts;  // sorted, one entry per unexpired window
  };
  struct WorkerWindows {
    std::multimap<Clock, IntentWindow*> pending_by_start;  // not acted
    std::multimap<Clock, IntentWindow*> by_end;            // every unexpired window
  };

  WorkerWindows& Worker(WorkerId worker);
  // Heap bytes of a window: itself, its keys, its node in windows_ and in
  // its worker's orders (both until it is acted on, then by_end only).
  static size_t WindowBytes(const IntentWindow& window);

  // Bytes of the windows and key states (nodes and arrays); MemoryBytes adds
  // the hash tables' bucket arrays.
  size_t bytes_ = 0;
  size_t pairs_ = 0;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<IntentWindow>> windows_;
  std::vector<WorkerWindows> workers_;
  std::vector<std::unordered_map<Key, KeyState>> keys_;  // per table
};

}  // namespace strata::engine
