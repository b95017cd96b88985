#include "engine/intent_index.h"

#include <algorithm>

#include "base/assert.h"

namespace strata::engine {
namespace {

// libstdc++ node sizes: an unordered_map node holds a next pointer, the
// value and the cached hash; a multimap node three pointers and a colour
// word before the value.
template <class Value>
constexpr size_t kHashNodeBytes = sizeof(void*) + sizeof(Value) + sizeof(size_t);
template <class Value>
constexpr size_t kTreeNodeBytes = 4 * sizeof(void*) + sizeof(Value);

}  // namespace

IntentIndex::WorkerWindows& IntentIndex::Worker(WorkerId worker) {
  if (worker >= workers_.size()) workers_.resize(worker + 1);
  return workers_[worker];
}

uint64_t IntentIndex::Add(WorkerId worker, TableId table, std::span<const Key> keys, Clock start,
                          Clock end) {
  STRATA_ASSERT(table < keys_.size(), "IntentIndex::Add: table out of range");
  STRATA_ASSERT(start < end, "IntentIndex::Add: empty window");
  auto window = std::make_unique<IntentWindow>();
  window->id = next_id_++;
  window->worker = worker;
  window->table = table;
  window->start = start;
  window->end = end;
  window->keys.assign(keys.begin(), keys.end());
  std::sort(window->keys.begin(), window->keys.end());
  window->keys.erase(std::unique(window->keys.begin(), window->keys.end()), window->keys.end());
  auto& table_keys = keys_[table];
  using KeyNode = std::pair<const Key, KeyState>;
  for (Key key : window->keys) {
    auto [it, fresh] = table_keys.try_emplace(key);
    auto& starts = it->second.starts;
    const size_t cap_before = starts.capacity();
    starts.insert(std::upper_bound(starts.begin(), starts.end(), start), start);
    bytes_ += (starts.capacity() - cap_before) * sizeof(Clock);
    if (fresh) bytes_ += kHashNodeBytes<KeyNode>;
  }
  pairs_ += window->keys.size();
  bytes_ += WindowBytes(*window);
  IntentWindow* raw = window.get();
  WorkerWindows& ww = Worker(worker);
  ww.pending_by_start.emplace(start, raw);
  ww.by_end.emplace(end, raw);
  windows_.emplace(raw->id, std::move(window));
  return raw->id;
}

std::vector<IntentWindow*> IntentIndex::Due(WorkerId worker, Clock act_before) {
  std::vector<IntentWindow*> out;
  WorkerWindows& ww = Worker(worker);
  for (auto it = ww.pending_by_start.begin();
       it != ww.pending_by_start.end() && it->first < act_before; ++it) {
    out.push_back(it->second);
  }
  return out;
}

void IntentIndex::MarkActed(IntentWindow* window) {
  STRATA_ASSERT(!window->acted, "IntentIndex::MarkActed twice");
  WorkerWindows& ww = Worker(window->worker);
  auto range = ww.pending_by_start.equal_range(window->start);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second == window) {
      ww.pending_by_start.erase(it);
      break;
    }
  }
  bytes_ -= WindowBytes(*window);
  window->acted = true;
  bytes_ += WindowBytes(*window);
  auto& table_keys = keys_[window->table];
  for (Key key : window->keys) table_keys[key].acted++;
}

void IntentIndex::Expire(WorkerId worker, Clock clock,
                         const std::function<void(TableId, Key)>& unpin,
                         const std::function<void(TableId, Key, Clock)>& next_use) {
  WorkerWindows& ww = Worker(worker);
  while (!ww.by_end.empty() && ww.by_end.begin()->first <= clock) {
    IntentWindow* window = ww.by_end.begin()->second;
    ww.by_end.erase(ww.by_end.begin());
    if (!window->acted) {
      auto range = ww.pending_by_start.equal_range(window->start);
      for (auto it = range.first; it != range.second; ++it) {
        if (it->second == window) {
          ww.pending_by_start.erase(it);
          break;
        }
      }
    }
    auto& table_keys = keys_[window->table];
    for (Key key : window->keys) {
      auto it = table_keys.find(key);
      STRATA_ASSERT(it != table_keys.end(), "IntentIndex: key of a window not tracked");
      KeyState& state = it->second;
      auto pos = std::lower_bound(state.starts.begin(), state.starts.end(), window->start);
      STRATA_ASSERT(pos != state.starts.end() && *pos == window->start,
                    "IntentIndex: window start missing from key");
      state.starts.erase(pos);
      --pairs_;
      if (window->acted) {
        STRATA_ASSERT(state.acted > 0, "IntentIndex: acted count underflow");
        if (--state.acted == 0) unpin(window->table, key);
      }
      Clock next = state.starts.empty() ? kClockNever : state.starts.front();
      if (state.starts.empty()) {
        bytes_ -= state.starts.capacity() * sizeof(Clock) +
                  kHashNodeBytes<std::pair<const Key, KeyState>>;
        table_keys.erase(it);
      }
      next_use(window->table, key, next);
    }
    bytes_ -= WindowBytes(*window);
    windows_.erase(window->id);
  }
}

size_t IntentIndex::WindowBytes(const IntentWindow& window) {
  return sizeof(IntentWindow) + window.keys.capacity() * sizeof(Key) +
         kHashNodeBytes<std::pair<const uint64_t, std::unique_ptr<IntentWindow>>> +
         (window.acted ? 1 : 2) * kTreeNodeBytes<std::pair<const Clock, IntentWindow*>>;
}

size_t IntentIndex::MemoryBytes() const {
  size_t bytes = bytes_ + windows_.bucket_count() * sizeof(void*);
  for (const auto& t : keys_) bytes += t.bucket_count() * sizeof(void*);
  return bytes;
}

Clock IntentIndex::NextUse(TableId table, Key key) const {
  const auto& table_keys = keys_[table];
  auto it = table_keys.find(key);
  if (it == table_keys.end() || it->second.starts.empty()) return kClockNever;
  return it->second.starts.front();
}

uint32_t IntentIndex::ActedCount(TableId table, Key key) const {
  const auto& table_keys = keys_[table];
  auto it = table_keys.find(key);
  return it == table_keys.end() ? 0 : it->second.acted;
}

size_t IntentIndex::TrackedKeys() const {
  size_t n = 0;
  for (const auto& t : keys_) n += t.size();
  return n;
}

}  // namespace strata::engine
