// Format 2's cleaner (docs/ssd-format.md, "Cleaning"): the steps that copy
// a victim segment's live records forward without holding the table lock
// across their I/O, the background thread that runs them, and the pacing of
// writes against it (log_row_store.h).
#include <algorithm>
#include <bit>
#include <thread>

#include "base/assert.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "storage/ssd/log_store.h"

namespace strata::storage::logstore {

Store::~Store() {
  {
    base::MutexLock lock(&cleaner_mu_);
    stopping_ = true;
    cleaner_cv_.SignalAll();
    progress_cv_.SignalAll();
  }
  if (cleaner_.joinable()) cleaner_.join();
}

void Store::StartCleaner() {
  {
    base::MutexLock lock(&cleaner_mu_);
    reclaimed_.assign(tables_.size(), 0);
    step_credit_.assign(tables_.size(), 0);
    stuck_.assign(tables_.size(), Status::Ok());
    failed_steps_.assign(tables_.size(), 0);
  }
  for (size_t i = 0; i < tables_.size(); ++i) {
    tables_[i]->pos = i;
    checkpoint_quiesces_ = checkpoint_quiesces_ || !tables_[i]->ranged;
  }
  if (options_.ssd_background_cleaning) {
    cleaner_ = std::thread([this] { CleanerThread(); });
    base::NameThread(cleaner_.native_handle(), "strata-ssd-gc");
  }
}

bool Store::Over(const Table& t, double space_amp) const {
  // A few segments of slack: a small table (a head or two and a few sealed
  // segments) is never "over".
  constexpr uint64_t kSlackSegments = 4;
  if (t.ranged) {
    // Key ranges: the log against its budget (each range holds a head).
    if (t.LogSlots() <= t.ranges.size() + kSlackSegments) return false;
    const double fraction =
        options_.ssd_merge_log_fraction + (space_amp - options_.gc_space_amp_trigger);
    return double(t.LogSlots()) * double(t.segment_bytes) >
           fraction * double(t.rows) * double(t.spec.row_bytes);
  }
  if (t.current_slots <= kSlackSegments) return false;
  return double(t.current_slots) * double(t.segment_bytes) >
         space_amp * double(t.rows) * double(t.spec.row_bytes);
}

uint64_t Store::PickVictim(const Table& t) const {
  uint64_t best = kNone;
  for (uint64_t s = 0; s < t.slots.size(); ++s) {
    const Slot& slot = t.slots[s];
    if (!slot.sealed || (slot.state != kCurrent && slot.state != kBoth)) continue;
    if (slot.live >= t.capacity) continue;  // nothing to reclaim
    if (best == kNone || slot.live < t.slots[best].live ||
        (slot.live == t.slots[best].live && slot.state == kCurrent)) {
      best = s;
    }
  }
  return best;
}

Status Store::Clean(Table& t, uint64_t records) {
  // Reclaim the room of twice the records about to be appended (so the
  // segments shrink back to the target), in whole victims; a bound on the
  // victims ends the loop when they hold little. A failed step is retried
  // by a later write after its back-off; the write itself is refused only
  // when its table is stuck past the stall bound.
  const uint64_t victims_max = 2 + 4 * (records / t.capacity);
  uint64_t freed = 0;
  for (uint64_t i = 0; i < victims_max && freed < 2 * records; ++i) {
    uint64_t reclaimed = 0;
    Clock::time_point retry_at = Clock::time_point::max();
    if (!Step(t, &reclaimed, &retry_at).ok() || reclaimed == 0) break;
    freed += reclaimed;
  }
  return StuckOverStall(t);
}

Status Store::Step(Table& t, uint64_t* reclaimed, Clock::time_point* retry_at) {
  int32_t range = -1;
  const Status s =
      t.ranged ? MergeStep(t, reclaimed, &range, retry_at) : CleanStep(t, reclaimed, retry_at);
  if (!s.ok()) {
    *reclaimed = 0;
    NoteStepFailure(t, range, s, retry_at);
  } else if (*reclaimed > 0) {
    ++merges_;
    NoteStepSuccess(t, range);
  }
  return s;
}

void Store::NoteStepFailure(Table& t, int32_t range, const Status& s, Clock::time_point* retry_at) {
  ++merge_failures_;
  Status stuck;
  {
    base::WriterLock lock(&t.mu);
    Retry& r = range >= 0 ? t.ranges[static_cast<size_t>(range)].retry : t.clean_retry;
    ++r.failures;
    const uint64_t growth = uint64_t{1} << std::min<uint32_t>(r.failures - 1, 6);
    static_assert(kRetryBackoffGrowthMax == 64, "the shift above caps the growth at 2^6");
    r.at = Clock::now() + std::chrono::microseconds(options_.merge_retry_backoff_us * growth);
    *retry_at = std::min(*retry_at, r.at);
    const std::string what = range >= 0
                                 ? "merging key range " + std::to_string(range) + " of table "
                                 : "cleaning table ";
    r.last = s.WithContext(what + t.spec.name + " (file " + t.file->path() + ") failed " +
                           std::to_string(r.failures) + " time(s) in a row");
    if (r.failures >= kStuckFailures) stuck = r.last;
    // Logged at the first failure in a row, then at 2, 4, 8, ... of them.
    if (std::has_single_bit(r.failures)) {
      STRATA_LOG_WARN("native store %s: %s", options_.dir.c_str(), r.last.ToString().c_str());
    }
  }
  base::MutexLock lock(&cleaner_mu_);
  ++failed_steps_[t.pos];
  if (stuck.ok()) return;
  if (stuck_[t.pos].ok()) {
    stuck_[t.pos] = stuck.WithContext(
        "puts and deletes past the table's space bound are refused "
        "until a merge or cleaning step succeeds");
  }
  progress_cv_.SignalAll();
}

void Store::NoteStepSuccess(Table& t, int32_t range) {
  bool still_stuck = false;
  {
    base::WriterLock lock(&t.mu);
    Retry& r = range >= 0 ? t.ranges[static_cast<size_t>(range)].retry : t.clean_retry;
    if (r.failures == 0) return;
    r = Retry{};
    still_stuck = t.clean_retry.failures >= kStuckFailures;
    for (const Range& rg : t.ranges)
      still_stuck = still_stuck || rg.retry.failures >= kStuckFailures;
  }
  if (still_stuck) return;
  base::MutexLock lock(&cleaner_mu_);
  stuck_[t.pos] = Status::Ok();
}

Status Store::StuckOverStall(Table& t) {
  {
    base::MutexLock lock(&cleaner_mu_);
    if (stuck_[t.pos].ok()) return Status::Ok();
  }
  bool over = false;
  {
    base::ReaderLock lock(&t.mu);
    over = Over(t, options_.gc_space_amp_trigger + options_.gc_space_amp_stall_slack);
  }
  if (!over) return Status::Ok();
  base::MutexLock lock(&cleaner_mu_);
  return stuck_[t.pos];
}

Status Store::CleanStep(Table& t, uint64_t* reclaimed, Clock::time_point* retry_at) {
  *reclaimed = 0;
  if (!Failed().ok()) return Status::Ok();  // writes refused: nothing to make room for
  uint64_t victim = kNone, records = 0, segment_seq = 0;
  {
    base::ReaderLock lock(&t.mu);
    if (!OverTarget(t)) return Status::Ok();
    if (t.clean_retry.failures > 0 && Clock::now() < t.clean_retry.at) {
      *retry_at = std::min(*retry_at, t.clean_retry.at);
      return Status::Ok();
    }
    victim = PickVictim(t);
    if (victim == kNone) return Status::Ok();
    records = t.slots[victim].records;
    segment_seq = t.slots[victim].segment_seq;
  }
  // The victim is sealed and stays until this step frees it: only cleaning
  // frees a sealed current segment, and a checkpoint waits for the step.
  const uint64_t bytes = RoundUp(t.RecordOffset(records));
  STRATA_RETURN_IF_ERROR(EnsureBytes(&clean_victim_, bytes));
  std::vector<uint32_t> pages;
  for (uint64_t b = 0; b < bytes / kBlock; ++b) {
    pages.push_back(static_cast<uint32_t>(victim * t.slot_blocks + b));
  }
  auto* data = reinterpret_cast<std::byte*>(clean_victim_.data());
  STRATA_RETURN_IF_ERROR(t.file->ReadPages(pages, data));
  bytes_read_ += bytes;
  const uint64_t base = victim * t.segment_bytes;
  STRATA_RETURN_IF_ERROR(VerifySegmentHeader(data, t, segment_seq, t.file->path(), base));
  Hook(CleanPoint::kVictimRead);
  // Under the lock: which records entries still name, and where their
  // copies go. A tombstone may go once no other segment (current or
  // checkpointed) holds a record older than it: none could then reappear
  // at a rebuild (a copy written later holds a seq of the victim's, and
  // no copy of an older record of its key is made: that record is dead).
  std::vector<uint64_t> live, dropped;  // record indexes in the victim
  {
    base::WriterLock lock(&t.mu);
    uint64_t others_min_seq = kNone;
    for (uint64_t s = 0; s < t.slots.size(); ++s) {
      if (s != victim && t.slots[s].state != kFree) {
        others_min_seq = std::min(others_min_seq, t.slots[s].min_seq);
      }
    }
    for (uint64_t i = 0; i < records; ++i) {
      const Parsed p = ParseRecord(data + t.RecordOffset(i));
      if (!t.index.Contains(ssd::MixKey(p.key), t.Address(victim, i))) continue;
      if (p.kind == ssd::kRecordTombstone && p.seq < others_min_seq) {
        dropped.push_back(i);
      } else {
        live.push_back(i);
      }
    }
    if (!live.empty()) {
      STRATA_RETURN_IF_ERROR(
          PlanAppend(t, kCleanerHead, live.size(), &clean_plan_, &clean_staging_));
    }
  }
  // Without the lock: verify what is kept or dropped, write the copies.
  std::vector<NewRecord> copies;
  copies.reserve(live.size());
  Status s;
  for (size_t j = 0; j < live.size() + dropped.size() && s.ok(); ++j) {
    const uint64_t i = j < live.size() ? live[j] : dropped[j - live.size()];
    const std::byte* rec = data + t.RecordOffset(i);
    Parsed p;
    s = VerifyRecord(rec, t, segment_seq, i, t.file->path(), base + t.RecordOffset(i), &p);
    if (s.ok() && j < live.size()) {
      copies.push_back({p.key, p.seq, p.kind,
                        p.kind == ssd::kRecordRow ? rec + ssd::kRecordHeaderBytes : nullptr});
    }
  }
  auto* staging = reinterpret_cast<std::byte*>(clean_staging_.data());
  if (s.ok() && !copies.empty()) s = WriteAppend(t, kCleanerHead, clean_plan_, copies, staging);
  if (!s.ok()) {
    base::WriterLock lock(&t.mu);
    if (!live.empty()) UndoAppend(t, clean_plan_);
    return s;
  }
  Hook(CleanPoint::kCopiesWritten);
  base::WriterLock lock(&t.mu);
  // The copies are written: switch the entries still naming the victim's
  // records to them (an entry a put changed meanwhile stays with the put;
  // its copy is dead), then give up the victim.
  std::vector<uint64_t> addrs;
  if (!copies.empty()) CommitAppend(t, kCleanerHead, clean_plan_, copies, staging, &addrs);
  Slot& v = t.slots[victim];
  for (size_t c = 0; c < copies.size(); ++c) {
    if (t.index.Replace(ssd::MixKey(copies[c].key), t.Address(victim, live[c]), addrs[c],
                        copies[c].kind)) {
      ++t.slots[t.SlotOf(addrs[c])].live;
      --v.live;
    }
  }
  for (uint64_t i : dropped) {
    const Parsed p = ParseRecord(data + t.RecordOffset(i));
    if (t.index.Erase(ssd::MixKey(p.key), t.Address(victim, i))) {
      --t.tombstones;
      --v.live;
    }
  }
  STRATA_ASSERT(v.live == 0, "a cleaned segment's record is still named by the index");
  Release(t, victim);
  *reclaimed = t.capacity - copies.size();
  return Status::Ok();
}

void Store::WakeCleaner() {
  base::MutexLock lock(&cleaner_mu_);
  ++wake_seq_;
  if (cleaner_idle_) {
    cleaner_idle_ = false;
    cleaner_cv_.Signal();
  }
}

Status Store::BeforeWrite(Table& t, uint64_t records) {
  bool stall = false;
  {
    base::ReaderLock lock(&t.mu);
    stall = Over(t, options_.gc_space_amp_trigger + options_.gc_space_amp_stall_slack);
  }
  if (!stall) return Status::Ok();
  Hook(CleanPoint::kStall);
  {
    base::MutexLock lock(&cleaner_mu_);
    // Wait for the cleaner to reclaim twice this write's room, at most:
    // also stop when it sleeps (nothing it can clean), gets stuck or stops.
    // While it retries a failed step after its back-off, the write waits;
    // on a stuck table it waits for the next retry (at most the longest
    // back-off) and is refused only when that fails too, so that puts pass
    // again as soon as a retry succeeds.
    const uint64_t target = reclaimed_[t.pos] + 2 * records;
    const uint64_t failed = failed_steps_[t.pos];
    ++wake_seq_;
    cleaner_idle_ = false;
    cleaner_cv_.Signal();
    while (reclaimed_[t.pos] < target && !cleaner_idle_ && !stopping_ &&
           (stuck_[t.pos].ok() || failed_steps_[t.pos] == failed)) {
      progress_cv_.Wait(&cleaner_mu_);
    }
    if (reclaimed_[t.pos] >= target || stuck_[t.pos].ok()) return Status::Ok();
  }
  // Stuck: refused while the table is still past the stall bound (merges
  // of its other ranges may have brought it back).
  return StuckOverStall(t);
}

void Store::Credit(const Table& t, uint64_t records) {
  if (records == 0) return;
  base::MutexLock lock(&cleaner_mu_);
  reclaimed_[t.pos] += records;
  step_credit_[t.pos] += records;
  progress_cv_.SignalAll();
}

void Store::CleanerThread() {
  for (;;) {
    uint64_t seen = 0;
    {
      base::MutexLock lock(&cleaner_mu_);
      while (!stopping_ && (cleaner_idle_ || pauses_ > 0)) cleaner_cv_.Wait(&cleaner_mu_);
      if (stopping_) return;
      seen = wake_seq_;
    }
    bool stepped = false, whole_round = true;
    // The first time a step skipped for its back-off (or failed just now)
    // may run again.
    Clock::time_point retry_at = Clock::time_point::max();
    for (auto& t : tables_) {
      uint64_t reclaimed = 0;
      Status s;
      {
        base::MutexLock clean(&clean_mu_);
        s = Step(*t, &reclaimed, &retry_at);  // a failure is logged and recorded there
      }
      {
        base::MutexLock lock(&cleaner_mu_);
        // What the step credited as it went is already counted; a failed
        // step reclaimed nothing, so its credits are taken back.
        uint64_t& credit = step_credit_[t->pos];
        if (s.ok()) {
          reclaimed_[t->pos] += reclaimed - std::min(reclaimed, credit);
        } else {
          reclaimed_[t->pos] -= credit;
        }
        credit = 0;
        if (!s.ok() || reclaimed > 0) progress_cv_.SignalAll();
        // A checkpoint waiting for the cleaning lock goes first.
        whole_round = pauses_ == 0 && !stopping_;
      }
      Hook(CleanPoint::kStepEnd);
      stepped = stepped || reclaimed > 0;
      if (!whole_round) break;
    }
    if (!stepped && whole_round) {
      base::MutexLock lock(&cleaner_mu_);
      if (retry_at != Clock::time_point::max()) {
        // Only retries are left: wait for the first (or for a stop, a
        // checkpoint's end); writes at the stall bound keep waiting.
        if (!stopping_) cleaner_cv_.WaitUntil(&cleaner_mu_, retry_at);
      } else if (wake_seq_ == seen) {
        cleaner_idle_ = true;  // until a write finds a table over its target
        progress_cv_.SignalAll();
      }
    }
  }
}

void Store::Release(Table& t, uint64_t slot) {
  if (t.slots[slot].state == kBoth) {
    t.SetState(slot, kCheckpointOnly);
  } else {
    t.SetState(slot, kFree);
  }
}

}  // namespace strata::storage::logstore
