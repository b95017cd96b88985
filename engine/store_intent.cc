// Intents, DrainIntents and the planner thread.
//
// Intent() only appends to the worker's inbox (a mutex held for one memcpy;
// never I/O). Intents waiting in inboxes are moved into the IntentIndex, and
// resident rows re-ranked by their new next use (ApplyWaitingIntents), by
// the next Pull or planner round, whichever comes first: so a Pull's
// evictions see every intent given before it, as Belady on the known future
// asks, however far the planner is behind. The planner's rounds also expire
// windows (unpinning) and act on the windows AdaPM's timing says are due, a
// bounded number of keys per round.
#include <algorithm>
#include <chrono>
#include <unordered_set>

#include "base/assert.h"
#include "base/log.h"
#include "engine/store_impl.h"

namespace strata::engine {

Status StoreImpl::Intent(WorkerId worker, TableId table, std::span<const Key> keys, Clock start,
                         Clock end) {
  TableKeys one{table, keys};
  return Intent(worker, std::span<const TableKeys>(&one, 1), start, end);
}

Status StoreImpl::Intent(WorkerId worker, std::span<const TableKeys> keys, Clock start, Clock end) {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  STRATA_RETURN_IF_ERROR(CheckWorker(worker));
  if (start >= end) {
    return Status::InvalidArgument("Intent: empty window [" + std::to_string(start) + ", " +
                                   std::to_string(end) + ")");
  }
  uint64_t total = 0;
  for (const TableKeys& tk : keys) {
    STRATA_RETURN_IF_ERROR(CheckTable(tk.table));
    STRATA_RETURN_IF_ERROR(CheckBatch(tk.keys, tk.keys.data(), "Intent"));
    total += tk.keys.size();
  }
  Worker& w = *workers_.slots[worker];
  if (end <= w.clock.load(std::memory_order_acquire)) {
    counters_.expired_intents.fetch_add(total, std::memory_order_relaxed);
    return Status::Ok();
  }
  base::MutexLock lock(&w.inbox_mu);
  if (w.inbox_keys.size() + total > kInboxKeysMax) {
    return Status::ResourceExhausted(
        "Intent: worker " + std::to_string(worker) + " has " + std::to_string(w.inbox_keys.size()) +
        " keys waiting for the planner (at most " + std::to_string(kInboxKeysMax) + ")");
  }
  uint64_t entries = 0;
  for (const TableKeys& tk : keys) {
    if (tk.keys.empty()) continue;
    w.inbox.push_back({tk.table, start, end, w.inbox_keys.size(), tk.keys.size()});
    w.inbox_keys.insert(w.inbox_keys.end(), tk.keys.begin(), tk.keys.end());
    ++entries;
  }
  counters_.intents.fetch_add(total, std::memory_order_relaxed);
  intents_waiting_.fetch_add(entries, std::memory_order_release);
  return Status::Ok();
}

Status StoreImpl::ApplyWaitingIntents() {
  if (intents_waiting_.load(std::memory_order_acquire) == 0) return Status::Ok();
  base::MutexLock lock(&apply_mu_);
  apply_keys_.resize(tables_.size());
  for (std::vector<Key>& keys : apply_keys_) keys.clear();
  DrainInboxes(&apply_keys_);
  return ApplyNewIntents(apply_keys_);
}

void StoreImpl::NoteIntentIndexSize() {
  tracked_keys_.store(intents_.TrackedKeys(), std::memory_order_release);
  const uint64_t bytes = intents_.MemoryBytes();
  const uint64_t pairs = intents_.PendingPairs();
  counters_.intent_bytes.store(bytes, std::memory_order_relaxed);
  counters_.intent_pairs.store(pairs, std::memory_order_relaxed);
  // Only the planner writes these (under intent_mu_): a plain max.
  if (bytes > counters_.intent_bytes_max.load(std::memory_order_relaxed))
    counters_.intent_bytes_max.store(bytes, std::memory_order_relaxed);
  if (pairs > counters_.intent_pairs_max.load(std::memory_order_relaxed))
    counters_.intent_pairs_max.store(pairs, std::memory_order_relaxed);
}

Status StoreImpl::PlannerError() {
  base::MutexLock lock(&planner_.mu);
  return planner_.error;
}

Status StoreImpl::DrainIntents() {
  STRATA_RETURN_IF_ERROR(CheckOpen());
  base::MutexLock lock(&planner_.mu);
  uint64_t ticket = ++planner_.requested;
  planner_.cv.SignalAll();
  while (planner_.completed < ticket && !planner_.stop && planner_.error.ok()) {
    planner_.cv.Wait(&planner_.mu);
  }
  if (!planner_.error.ok()) return planner_.error;
  if (planner_.completed < ticket) return Status::FailedPrecondition("store is closing");
  return Status::Ok();
}

void StoreImpl::PlannerLoop() {
  const auto period = std::chrono::microseconds(std::max<uint32_t>(options_.planner_round_us, 1));
  bool more = false;
  while (true) {
    uint64_t target = 0;
    {
      base::MutexLock lock(&planner_.mu);
      if (!more) {
        const auto deadline = std::chrono::steady_clock::now() + period;
        while (!planner_.stop && planner_.requested <= planner_.completed &&
               planner_.cv.WaitUntil(&planner_.mu, deadline)) {
        }
      }
      if (planner_.stop) return;
      if (!planner_.error.ok()) {  // sticky: stop working, keep answering
        while (!planner_.stop) planner_.cv.Wait(&planner_.mu);
        return;
      }
      target = planner_.requested;
    }
    auto t_start = std::chrono::steady_clock::now();
    Result<bool> round = PlannerRound();
    auto us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now() - t_start)
                                        .count());
    counters_.planner_rounds.fetch_add(1, std::memory_order_relaxed);
    counters_.planner_round_us_total.fetch_add(us, std::memory_order_relaxed);
    uint64_t prev = counters_.planner_round_us_max.load(std::memory_order_relaxed);
    while (us > prev && !counters_.planner_round_us_max.compare_exchange_weak(prev, us)) {
    }
    {
      base::MutexLock lock(&planner_.mu);
      if (!round.ok() && round.status().IsIOError()) {
        // A prefetch that hit an I/O error changed nothing (its rows stayed
        // where they were, its window stays due): retried next round, and a
        // Pull fetches what is still missing. Not sticky.
        if (counters_.planner_io_errors.fetch_add(1, std::memory_order_relaxed) == 0) {
          STRATA_LOG_WARN(
              "planner of %s: %s (retried; further errors only counted in "
              "Stats().planner_io_errors)",
              options_.dir.c_str(), round.status().ToString().c_str());
        }
        more = false;
        planner_.completed =
            std::max(planner_.completed, target);  // a drain never hangs on a bad disk
      } else if (!round.ok()) {
        STRATA_LOG_ERROR("planner of %s: %s", options_.dir.c_str(),
                         round.status().ToString().c_str());
        planner_.error = round.status();
        more = false;
      } else {
        more = round.value();
        if (!more) planner_.completed = std::max(planner_.completed, target);
      }
    }
    planner_.cv.SignalAll();
  }
}

void StoreImpl::DrainInboxes(std::vector<std::vector<Key>>* added_keys) {
  uint32_t n = workers_.count.load(std::memory_order_acquire);
  std::vector<PendingIntent> inbox;
  std::vector<Key> inbox_keys;
  for (uint32_t w = 0; w < n; ++w) {
    Worker& worker = *workers_.slots[w];
    {
      base::MutexLock lock(&worker.inbox_mu);
      inbox.swap(worker.inbox);
      inbox_keys.swap(worker.inbox_keys);
      intents_waiting_.fetch_sub(inbox.size(), std::memory_order_relaxed);
    }
    if (inbox.empty()) continue;
    base::MutexLock lock(&intent_mu_);
    for (const PendingIntent& p : inbox) {
      std::span<const Key> keys(inbox_keys.data() + p.offset, p.count);
      intents_.Add(w, p.table, keys, p.start, p.end);
      auto& table_keys = (*added_keys)[p.table];
      table_keys.insert(table_keys.end(), keys.begin(), keys.end());
    }
    NoteIntentIndexSize();
    inbox.clear();
    inbox_keys.clear();
  }
}

// Resident rows named by new intents get their nearest intended use as
// next_use (T0 and T1), so eviction keeps them over rows nobody asked for.
Status StoreImpl::ApplyNewIntents(std::vector<std::vector<Key>>& added_keys) {
  for (size_t t = 0; t < added_keys.size(); ++t) {
    std::vector<Key>& keys = added_keys[t];
    if (keys.empty()) continue;
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    Table& table = *tables_[t];
    base::MutexLock lock(&table.mu);
    STRATA_RETURN_IF_ERROR(RefreshNextUse(table, keys, /*with_t1=*/true));
  }
  return Status::Ok();
}

Status StoreImpl::ApplyKeyUpdates(std::vector<KeyUpdate>& updates) {
  std::sort(updates.begin(), updates.end(), [](const KeyUpdate& a, const KeyUpdate& b) {
    return a.table != b.table ? a.table < b.table : a.key < b.key;
  });
  std::vector<Key> unpin, keys;
  size_t i = 0;
  while (i < updates.size()) {
    Table& table = *tables_[updates[i].table];
    unpin.clear();
    keys.clear();
    size_t j = i;
    for (; j < updates.size() && updates[j].table == table.id; ++j) {
      if (updates[j].unpin) unpin.push_back(updates[j].key);
      if (keys.empty() || keys.back() != updates[j].key) keys.push_back(updates[j].key);
    }
    i = j;
    base::MutexLock lock(&table.mu);
    STRATA_RETURN_IF_ERROR(table.t0->Pin(unpin, /*pin=*/false));
    STRATA_ASSERT(table.intent_pinned >= unpin.size(), "intent pin count underflow");
    table.intent_pinned -= unpin.size();
    STRATA_RETURN_IF_ERROR(RefreshNextUse(table, keys, /*with_t1=*/true));
  }
  return Status::Ok();
}

Result<bool> StoreImpl::PlannerRound() {
  STRATA_RETURN_IF_ERROR(ApplyWaitingIntents());

  bool more = false;
  uint64_t budget = options_.planner_keys_per_round_max;
  uint32_t n = workers_.count.load(std::memory_order_acquire);
  for (uint32_t w = 0; w < n; ++w) {
    Worker& worker = *workers_.slots[w];
    Clock clock = worker.clock.load(std::memory_order_acquire);
    int64_t horizon = worker.estimator->Update(clock);
    std::vector<KeyUpdate> updates;
    std::vector<IntentWindow*> due;
    {
      base::MutexLock lock(&intent_mu_);
      intents_.Expire(
          w, clock,
          [&](TableId t, Key k) {
            updates.push_back({t, k, kClockNever, true});
          },
          [&](TableId t, Key k, Clock next) {
            updates.push_back({t, k, next, false});
          });
      NoteIntentIndexSize();
      Clock act_before = horizon > kClockNever - clock ? kClockNever : clock + horizon;
      if (options_.intent_act_ahead_max != 0) {
        act_before = std::min<Clock>(act_before, clock + options_.intent_act_ahead_max);
      }
      due = intents_.Due(w, act_before);
    }
    STRATA_RETURN_IF_ERROR(ApplyKeyUpdates(updates));
    // The due windows within the round's budget, nearest first, grouped by
    // table: one fetch and one pin per table and round.
    std::vector<std::vector<IntentWindow*>> by_table(tables_.size());
    for (IntentWindow* window : due) {
      if (budget < window->size() && budget < options_.planner_keys_per_round_max) {
        more = true;  // the rest next round
        break;
      }
      budget -= std::min<uint64_t>(budget, window->size());
      by_table[window->table].push_back(window);
    }
    for (size_t t = 0; t < by_table.size(); ++t) {
      if (!by_table[t].empty())
        STRATA_RETURN_IF_ERROR(ActOnWindows(*tables_[t], by_table[t], clock));
    }
  }
  return more;
}

// Brings the due windows of one table (nearest first) into T0 and pins
// their keys not pinned yet. A window that would push T0's pinned share past
// kPinFractionMax waits (counted as deferred once), as do the windows after
// it, and is retried next round; it never blocks pulls.
Status StoreImpl::ActOnWindows(Table& table, std::span<IntentWindow* const> windows,
                               Clock worker_clock) {
  base::MutexLock lock(&table.mu);
  // Pins may fill kPinFractionMax of the table's weighted share (not of its
  // slot bound: pinning more windows ahead left T0's one order too few rows
  // to choose from, 1.17x MIN against 1.07x at T0 = 71% of the cache) and of
  // T0 as a whole (all tables' intent pins together).
  const auto own_cap = static_cast<uint64_t>(double(table.t0_share) * kPinFractionMax);
  const auto all_cap = static_cast<uint64_t>(double(options_.device_rows_max) * kPinFractionMax);
  const uint64_t others = T0IntentPins() - table.intent_pinned;
  const uint64_t pin_cap = std::min(own_cap, all_cap - std::min(all_cap, others));
  std::vector<IntentWindow*> accepted;
  std::vector<Key> new_pins, window_keys;
  std::unordered_set<Key> pinning;  // new pins of the windows accepted so far
  // The accepted windows' keys: windows already open first (their worker is
  // waiting or about to), then the rest; each part made sorted and unique
  // for MakeResident below.
  std::vector<Key> late, ahead;
  {
    base::MutexLock ilock(&intent_mu_);
    for (IntentWindow* window : windows) {
      window_keys.clear();
      intents_.AppendKeys(*window, &window_keys);
      std::vector<Key> fresh;
      for (Key k : window_keys) {
        if (intents_.ActedCount(table.id, k) == 0 && !pinning.contains(k)) fresh.push_back(k);
      }
      if (table.intent_pinned + new_pins.size() + fresh.size() > pin_cap) {
        if (!window->deferred) {
          window->deferred = true;
          counters_.deferred_intents.fetch_add(window->size(), std::memory_order_relaxed);
        }
        break;
      }
      pinning.insert(fresh.begin(), fresh.end());
      new_pins.insert(new_pins.end(), fresh.begin(), fresh.end());
      accepted.push_back(window);
      auto& part = window->start <= worker_clock ? late : ahead;
      part.insert(part.end(), window_keys.begin(), window_keys.end());
    }
  }
  if (accepted.empty()) return Status::Ok();
  for (auto* part : {&late, &ahead}) {
    std::sort(part->begin(), part->end());
    part->erase(std::unique(part->begin(), part->end()), part->end());
    uint64_t brought_in = 0;
    STRATA_RETURN_IF_ERROR(MakeResident(table, *part, /*count_access=*/false, &brought_in));
    counters_.prefetched_rows.fetch_add(brought_in, std::memory_order_relaxed);
    if (part == &late) counters_.late_prefetches.fetch_add(brought_in, std::memory_order_relaxed);
  }
  STRATA_RETURN_IF_ERROR(table.t0->Pin(new_pins, /*pin=*/true));
  table.intent_pinned += new_pins.size();
  {
    base::MutexLock ilock(&intent_mu_);
    for (IntentWindow* window : accepted) intents_.MarkActed(window);
  }
  return Status::Ok();
}

}  // namespace strata::engine
