// Format 2's cleaner (docs/ssd-format.md, "Cleaning"): the steps that copy
// a victim segment's live records forward without holding the table lock
// across their I/O, the background thread that runs them, and the pacing of
// writes against it (log_row_store.h).
#include <algorithm>
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
  }
  for (size_t i = 0; i < tables_.size(); ++i) tables_[i]->pos = i;
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
  // victims ends the loop when they hold little.
  const uint64_t victims_max = 2 + 4 * (records / t.capacity);
  uint64_t freed = 0;
  for (uint64_t i = 0; i < victims_max && freed < 2 * records; ++i) {
    uint64_t reclaimed = 0;
    STRATA_RETURN_IF_ERROR(Step(t, &reclaimed));
    if (reclaimed == 0) break;
    freed += reclaimed;
  }
  return Status::Ok();
}

Status Store::CleanStep(Table& t, uint64_t* reclaimed) {
  *reclaimed = 0;
  if (!Failed().ok()) return Status::Ok();  // writes refused: nothing to make room for
  uint64_t victim = kNone, records = 0, segment_seq = 0;
  {
    base::ReaderLock lock(&t.mu);
    if (!OverTarget(t)) return Status::Ok();
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

Status Store::TakeCleanError() {
  base::MutexLock lock(&cleaner_mu_);
  Status s = std::move(clean_error_);
  clean_error_ = Status::Ok();
  if (!s.ok()) cleaner_cv_.Signal();  // reported: the cleaner may retry
  return s;
}

Status Store::BeforeWrite(Table& t, uint64_t records) {
  bool stall = false;
  {
    base::ReaderLock lock(&t.mu);
    stall = Over(t, options_.gc_space_amp_trigger + options_.gc_space_amp_stall_slack);
  }
  if (stall) Hook(CleanPoint::kStall);
  base::MutexLock lock(&cleaner_mu_);
  if (stall && clean_error_.ok()) {
    // Wait for the cleaner to reclaim twice this write's room, at most:
    // also stop when it sleeps (nothing it can clean), fails or stops.
    const uint64_t target = reclaimed_[t.pos] + 2 * records;
    ++wake_seq_;
    cleaner_idle_ = false;
    cleaner_cv_.Signal();
    while (reclaimed_[t.pos] < target && !cleaner_idle_ && clean_error_.ok() && !stopping_) {
      progress_cv_.Wait(&cleaner_mu_);
    }
  }
  Status s = std::move(clean_error_);
  clean_error_ = Status::Ok();
  if (!s.ok()) cleaner_cv_.Signal();
  return s;
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
      while (!stopping_ && (cleaner_idle_ || pauses_ > 0 || !clean_error_.ok())) {
        cleaner_cv_.Wait(&cleaner_mu_);
      }
      if (stopping_) return;
      seen = wake_seq_;
    }
    bool stepped = false, whole_round = true;
    for (auto& t : tables_) {
      uint64_t reclaimed = 0;
      Status s;
      {
        base::MutexLock clean(&clean_mu_);
        s = Step(*t, &reclaimed);
      }
      if (!s.ok()) {
        STRATA_LOG_WARN("native store %s: cleaning table %s failed: %s", options_.dir.c_str(),
                        t->spec.name.c_str(), s.ToString().c_str());
      }
      {
        base::MutexLock lock(&cleaner_mu_);
        if (!s.ok()) clean_error_ = s.WithContext("cleaning table " + t->spec.name);
        // What the step credited as it went is already counted.
        uint64_t& credit = step_credit_[t->pos];
        reclaimed_[t->pos] += reclaimed - std::min(reclaimed, credit);
        credit = 0;
        if (!s.ok() || reclaimed > 0) progress_cv_.SignalAll();
        // A checkpoint waiting for the cleaning lock goes first.
        whole_round = s.ok() && pauses_ == 0 && !stopping_;
      }
      Hook(CleanPoint::kStepEnd);
      stepped = stepped || reclaimed > 0;
      if (!whole_round) break;
    }
    if (!stepped && whole_round) {
      base::MutexLock lock(&cleaner_mu_);
      if (wake_seq_ == seen && clean_error_.ok()) {
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
