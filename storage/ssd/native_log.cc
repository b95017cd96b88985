// Native store write logs (docs/ssd-format.md, "Write log"): MultiPut and
// Delete append to a per-table log instead of rewriting leaves. Rows are
// encoded as checksummed records into one aligned buffer and written with
// large sequential O_DIRECT requests through io::IoThreads, whole units
// only: the records of a unit not yet full stay in DRAM (WriteLog::tail)
// until a later append fills it, so no written unit is ever rewritten and
// calls of a few rows do not each take a unit; the DRAM LogIndex switches to
// the new records only once the write succeeded, so a failed call changes
// nothing. Deletes are tombstones in the index only.
//
// Each table has two logs and one index over both (key -> newest entry).
// When the active log's entries would pass the index's budget
// (write_log_fraction of the table's rows) it is frozen, the other becomes
// active, and a
// background thread merges the frozen one into the leaves: it reads the log
// sequentially, keeps the current rows of one range of mixed keys in DRAM
// (write_log_merge_bytes), sorts them and writes them through the
// copy-on-write rounds of native_write.cc, each leaf absorbing all its rows
// of the log in one rewrite. Each round's switch erases its entries from the
// index, so the active log grows into the room the merge frees; only index
// lookups, a round's page allocation and its switch hold the table's lock. A
// put that finds the index full waits for the merge's next round
// (backpressure). No MANIFEST names a log: a checkpoint merges both first
// and holds only leaves, and Open empties them.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "base/log.h"
#include "storage/ssd/limits.h"
#include "storage/ssd/native_table.h"

namespace strata::storage::native {
namespace {

// Bytes of units one log read round fetches at most (at least one unit).
constexpr size_t kLogReadBytesPerRoundMax = 8u << 20;
// A merge counts the log's rows per bucket of the top bits of their mixed
// keys to cut the key space into ranges of at most write_log_merge_bytes.
constexpr uint32_t kMergeBucketBits = 16;

}  // namespace

uint64_t Store::LogBudget(uint64_t rows) const {
  if (options_.write_log_fraction <= 0) return 0;  // no log: an empty index, never written
  const double wanted =
      std::max(double(options_.write_log_entries_min), options_.write_log_fraction * double(rows));
  return static_cast<uint64_t>(std::min(wanted, double(LogIndex::kRecordsMax)));
}

void Store::ResizeLogIndex(Table& t) {
  const uint64_t budget = std::max(LogBudget(t.row_count), t.log_index.size());
  const uint64_t have = t.log_index.entries_max();
  if (budget > have || 4 * budget < 3 * have) t.log_index.Rehash(budget);
}

Status Store::OpenLogs(Table& t) {
  t.log_layout = ssd::MakeLogLayout(t.spec.row_bytes);
  for (int which = 0; which < 2; ++which) {
    WriteLog& log = t.logs[which];
    STRATA_ASSIGN_OR_RETURN(
        log.file, PageFile::Open(env_, options_.dir + "/" + ssd::LogFileName(t.spec.id, which),
                                 t.log_layout.unit_bytes, /*create=*/true, options_.direct_io,
                                 io_threads_.get()));
    log.state = LogState::kReady;
    log.records = log.entries = log.rows = log.units = 0;
  }
  t.log_index.Reset(LogBudget(t.row_count));
  t.active = 0;
  t.logs[0].state = LogState::kActive;
  t.logs[0].epoch = ++t.log_epoch;
  return Status::Ok();
}

void Store::Freeze(Table& t, bool notify) {
  WriteLog& frozen = t.Active();
  WriteLog& next = t.Other();
  STRATA_ASSERT(next.state == LogState::kReady, "freezing a log while the other is busy");
  frozen.state = LogState::kFrozen;
  t.active = 1 - t.active;
  next.state = LogState::kActive;
  next.epoch = ++t.log_epoch;
  next.records = next.entries = next.rows = 0;
  if (!notify) return;
  t.SetMergeQueued(true);
  base::MutexLock lock(&merge_queue_mu_);
  if (std::find(merge_queue_.begin(), merge_queue_.end(), &t) == merge_queue_.end()) {
    merge_queue_.push_back(&t);
  }
  merge_queue_cv_.Signal();
}

Result<Store::Append> Store::AppendToLog(Table& t, std::span<const Key> keys, const std::byte* rows,
                                         uint64_t* progress, bool* queued) {
  const uint64_t n = keys.size();
  if (n == 0) return Append::kDone;
  const ssd::LogLayout& l = t.log_layout;
  const uint64_t records = rows != nullptr ? n : 0;
  const uint64_t budget = t.log_index.entries_max();
  if (n > budget) return Append::kTooBig;
  auto records_fit = [&](const WriteLog& log) {
    return log.records + records <= LogIndex::kRecordsMax;
  };
  if (t.Active().entries > 0 && t.Other().state == LogState::kReady &&
      (t.Active().entries + n > budget || !records_fit(t.Active()))) {
    Freeze(t, /*notify=*/true);
  }
  if (t.log_index.size() + n > budget || !records_fit(t.Active())) {
    *progress = t.Progress(queued);  // read under t.mu: a later round moves it
    return Append::kWait;
  }
  const uint32_t which = t.active;
  WriteLog& log = t.Active();
  // Rows per log: a new entry may replace one of either log.
  auto replaced = [&](uint32_t previous) REQUIRES(t.mu) {
    if (previous != LogIndex::kAbsent && RecordOf(previous) != LogIndex::kTombstone) {
      --t.logs[LogOf(previous)].rows;
    }
  };
  if (rows == nullptr) {
    for (Key key : keys) replaced(t.log_index.Insert(key, LogValue(which, LogIndex::kTombstone)));
    log.entries += n;
    return Append::kDone;
  }
  // The batch continues the records of the unit held in DRAM (`held` of
  // them, from earlier calls): that unit and the batch's are encoded into one
  // buffer, the whole units among them written, the last one, when not
  // full, kept as the new tail.
  const uint32_t rpu = l.records_per_unit;
  const uint64_t first = log.records;
  const uint64_t first_unit = first / rpu;
  const uint64_t held = first - first_unit * rpu;
  STRATA_ASSERT(first_unit == log.units,
                "a log's tail unit is not the one after its written units");
  const uint64_t units = (held + n + rpu - 1) / rpu;
  const uint64_t full_units = (held + n) / rpu;
  io::AlignedBuffer& out = *ThreadScratch(kWriteOutScratch);
  STRATA_RETURN_IF_ERROR(EnsureBytes(&out, units * l.unit_bytes));
  auto* data = reinterpret_cast<std::byte*>(out.data());
  std::memset(data, 0, units * l.unit_bytes);
  if (held > 0) std::memcpy(data, log.tail.data(), held * l.record_bytes);
  const uint32_t rb = t.spec.row_bytes;
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t slot = held + i;
    std::byte* dst = data + (slot / rpu) * l.unit_bytes + (slot % rpu) * l.record_bytes;
    SealLogRecord(dst, t.spec.id, LogSeed(t.spec.id, log.epoch, first + i), keys[i], rows + i * rb,
                  rb);
  }
  if (full_units > 0) {
    std::vector<uint32_t> pages(full_units);
    for (uint64_t u = 0; u < full_units; ++u) pages[u] = static_cast<uint32_t>(first_unit + u);
    STRATA_RETURN_IF_ERROR(log.file->WritePages(pages, data));
  }
  if (units > full_units) {  // the last unit is not full: held until an append fills it
    log.tail.resize(l.unit_bytes);
    std::memcpy(log.tail.data(), data + full_units * l.unit_bytes, l.unit_bytes);
  }
  // Written (or held): switch the index (a later entry of a key in the batch wins).
  for (uint64_t i = 0; i < n; ++i) {
    replaced(t.log_index.Insert(keys[i], LogValue(which, static_cast<uint32_t>(first + i))));
    ++log.rows;
  }
  log.records = first + n;
  log.entries += n;
  log.units = first_unit + full_units;
  bytes_written_ += full_units * l.unit_bytes;
  user_bytes_written_ += n * rb;
  rows_written_ += n;
  return Append::kDone;
}

Status Store::ReadFromLog(Table& t, const WriteLog& log, std::span<const Key> keys,
                          std::span<LogWant> wants, std::byte* rows, uint8_t* found) {
  const ssd::LogLayout& l = t.log_layout;
  const uint32_t rb = t.spec.row_bytes;
  std::sort(wants.begin(), wants.end(),
            [](const LogWant& a, const LogWant& b) { return a.record < b.record; });
  // Verifies the record of `w` at `src` (in unit `unit`) and copies its row.
  auto take = [&](const LogWant& w, const std::byte* src, uint64_t unit) {
    const Key key = keys[w.index];
    const uint64_t in_unit = uint64_t{w.record % l.records_per_unit} * l.record_bytes;
    STRATA_RETURN_IF_ERROR(
        VerifyLogRecord(src, t.spec.id, LogSeed(t.spec.id, log.epoch, w.record), key, rb,
                        log.file->path(), log.file->Offset(static_cast<uint32_t>(unit)) + in_unit));
    std::memcpy(rows + uint64_t{w.index} * rb, src + ssd::kLogRecordHeaderBytes, rb);
    found[w.index] = 1;
    return Status::Ok();
  };
  // Records of the unit not yet written are read from DRAM (the last wants).
  const uint64_t written = log.units * l.records_per_unit;
  size_t disk_end = wants.size();
  while (disk_end > 0 && wants[disk_end - 1].record >= written) --disk_end;
  for (size_t w = disk_end; w < wants.size(); ++w) {
    const uint64_t slot = wants[w].record - written;
    STRATA_RETURN_IF_ERROR(take(wants[w], log.tail.data() + slot * l.record_bytes, log.units));
  }
  io::AlignedBuffer& buf = *ThreadScratch(kGetScratch);
  std::vector<uint32_t> units;
  size_t pos = 0;
  while (pos < disk_end) {
    units.clear();
    size_t end = pos;
    while (end < disk_end) {
      const uint32_t unit = wants[end].record / l.records_per_unit;
      if (units.empty() || units.back() != unit) {
        if (!units.empty() && (units.size() + 1) * l.unit_bytes > kLogReadBytesPerRoundMax) break;
        units.push_back(unit);
      }
      ++end;
    }
    STRATA_RETURN_IF_ERROR(EnsureBytes(&buf, units.size() * l.unit_bytes));
    auto* data = reinterpret_cast<std::byte*>(buf.data());
    STRATA_RETURN_IF_ERROR(log.file->ReadPages(units, data));
    bytes_read_ += units.size() * uint64_t{l.unit_bytes};
    size_t u = 0;
    for (size_t w = pos; w < end; ++w) {
      const uint32_t unit = wants[w].record / l.records_per_unit;
      while (units[u] != unit) ++u;
      const uint64_t in_unit = uint64_t{wants[w].record % l.records_per_unit} * l.record_bytes;
      STRATA_RETURN_IF_ERROR(take(wants[w], data + u * l.unit_bytes + in_unit, unit));
    }
    pos = end;
  }
  return Status::Ok();
}

Status Store::MergeFrozen(Table& t) {
  STRATA_RETURN_IF_ERROR(Failed());
  // While a log is kFrozen only the holder of merge_mu changes its WriteLog
  // (Freeze needs the other log kReady) or reads its file, so the merge uses
  // it through `f` without t.mu; the index it shares with the active log is
  // read and changed under t.mu.
  WriteLog* f = nullptr;
  uint32_t which = 0;
  {
    base::ReaderLock lock(&t.mu);
    if (t.Other().state != LogState::kFrozen) return Status::Ok();
    f = &t.Other();
    which = 1 - t.active;
  }
  Hook(LogMergePoint::kMergeStart);
  const ssd::LogLayout& l = t.log_layout;
  const uint32_t rb = t.spec.row_bytes;
  const std::string& path = f->file->path();

  // Rows per bucket of mixed keys, to cut the key space into passes whose
  // rows fit write_log_merge_bytes (a pass holds at least one bucket). Puts
  // only ever take entries away from the frozen log, so these are bounds.
  constexpr uint32_t kBuckets = 1u << kMergeBucketBits;
  auto bucket_of = [](uint64_t mixed) { return uint32_t(mixed >> (64 - kMergeBucketBits)); };
  std::vector<uint32_t> bucket_rows(kBuckets, 0);
  {
    base::ReaderLock lock(&t.mu);
    t.log_index.ForEach([&](Key key, uint32_t value) {
      if (LogOf(value) == which && RecordOf(value) != LogIndex::kTombstone) {
        ++bucket_rows[bucket_of(ssd::MixKey(key))];
      }
    });
  }
  const uint64_t pass_rows_max = std::max<uint64_t>(1, options_.write_log_merge_bytes / rb);
  const uint64_t read_units_max = std::max<uint64_t>(1, kLogReadBytesPerRoundMax / l.unit_bytes);
  io::AlignedBuffer read_buf;
  std::vector<uint32_t> units;
  std::vector<std::byte> pass_rows;
  std::vector<Op> ops;
  uint32_t begin = 0;
  while (begin < kBuckets) {
    uint32_t end = begin;
    uint64_t want = 0;
    while (end < kBuckets && (end == begin || want + bucket_rows[end] <= pass_rows_max)) {
      want += bucket_rows[end++];
    }
    auto in_pass = [&](uint64_t mixed) {
      const uint32_t b = bucket_of(mixed);
      return b >= begin && b < end;
    };
    ops.clear();
    pass_rows.resize(want * rb);
    // Takes the records of unit `unit` (its bytes at `src`) that fall in the
    // pass and are still their key's newest entry.
    auto take_unit = [&](const std::byte* src, uint64_t unit) REQUIRES_SHARED(t.mu) {
      for (uint32_t s = 0; s < l.records_per_unit; ++s) {
        const uint64_t record = unit * l.records_per_unit + s;
        if (record >= f->records) break;
        const std::byte* rec = src + uint64_t{s} * l.record_bytes;
        Key key;
        std::memcpy(&key, rec + offsetof(ssd::LogRecordHeader, key), sizeof(key));
        const uint64_t mixed = ssd::MixKey(key);
        const uint32_t value = LogValue(which, static_cast<uint32_t>(record));
        uint32_t current = 0;
        // Only the key's newest entry counts: a record overwritten in this
        // log or the active one, or a unit's unused tail, is skipped.
        if (!in_pass(mixed) || !t.log_index.Find(key, &current) || current != value) continue;
        STRATA_RETURN_IF_ERROR(VerifyLogRecord(
            rec, t.spec.id, LogSeed(t.spec.id, f->epoch, record), key, rb, path,
            f->file->Offset(static_cast<uint32_t>(unit)) + uint64_t{s} * l.record_bytes));
        STRATA_ASSERT(ops.size() < want, "frozen log entries grew during a merge");
        std::byte* row = pass_rows.data() + ops.size() * rb;
        std::memcpy(row, rec + ssd::kLogRecordHeaderBytes, rb);
        ops.push_back({mixed, key, row, value});
      }
      return Status::Ok();
    };
    // One sequential read of the log per pass, in requests of up to 8 MiB.
    for (uint64_t u0 = 0; want > 0 && u0 < f->units; u0 += read_units_max) {
      const uint64_t n = std::min<uint64_t>(read_units_max, f->units - u0);
      units.resize(n);
      for (uint64_t u = 0; u < n; ++u) units[u] = static_cast<uint32_t>(u0 + u);
      STRATA_RETURN_IF_ERROR(EnsureBytes(&read_buf, n * l.unit_bytes));
      auto* data = reinterpret_cast<std::byte*>(read_buf.data());
      STRATA_RETURN_IF_ERROR(f->file->ReadPages(units, data));
      bytes_read_ += n * l.unit_bytes;
      base::ReaderLock lock(&t.mu);
      for (uint64_t u = 0; u < n; ++u) {
        STRATA_RETURN_IF_ERROR(take_unit(data + u * l.unit_bytes, u0 + u));
      }
    }
    if (want > 0 && f->records > f->units * l.records_per_unit) {  // the unit held in DRAM
      base::ReaderLock lock(&t.mu);
      STRATA_RETURN_IF_ERROR(take_unit(f->tail.data(), f->units));
    }
    {
      base::ReaderLock lock(&t.mu);
      t.log_index.ForEach([&](Key key, uint32_t value) {
        const uint64_t mixed = ssd::MixKey(key);
        if (value == LogValue(which, LogIndex::kTombstone) && in_pass(mixed)) {
          ops.push_back({mixed, key, nullptr, value});
        }
      });
    }
    std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.mixed < b.mixed; });
    STRATA_RETURN_IF_ERROR(MergeOps(t, ops));
    // Every entry of the range is now merged (and erased) or replaced by a
    // put; one left means its record was not found: a damaged key.
    uint64_t left = 0;
    {
      base::ReaderLock lock(&t.mu);
      t.log_index.ForEach([&](Key key, uint32_t value) {
        if (LogOf(value) == which && in_pass(ssd::MixKey(key))) ++left;
      });
    }
    if (left > 0) {
      return Status::Corruption(path + ": the merge did not find " + std::to_string(left) +
                                " of the rows the log index holds in its key range (a log " +
                                "record's key is damaged; table " + t.spec.name + ")");
    }
    begin = end;
  }

  // Merged: no index entry names the log any more; empty it, make it ready.
  {
    base::WriterLock lock(&t.mu);
    f->state = LogState::kRetired;
    ResizeLogIndex(t);
  }
  (void)NoteCleanup(f->file->TruncatePages(0));  // a failure leaves stale units, never read
  base::WriterLock lock(&t.mu);
  f->records = f->entries = f->rows = f->units = 0;
  f->state = LogState::kReady;
  return Status::Ok();
}

Status Store::MergeOps(Table& t, std::span<const Op> ops) {
  // Only the holder of merge_mu changes the directory, the pages or the data
  // file, so a round reads and writes pages without t.mu. It takes the lock
  // once: to switch its pages in and, in the same hold, to group the next
  // round's ops by leaf and allocate the most pages that round may write
  // (from the leaves' row counts; the unused ones are freed at its switch).
  std::vector<Group> groups, next_groups;
  std::vector<uint32_t> pages, next_pages;
  Round r;
  PageFile* file = nullptr;
  auto plan = [&](size_t from, std::vector<Group>* g, std::vector<uint32_t>* p)
                  REQUIRES(t.mu) -> Result<size_t> {
    const size_t end = GroupRound(t, ops, from, g, kMergeLeavesPerRoundMax);
    STRATA_ASSIGN_OR_RETURN(*p, t.Allocate(RoundPagesMax(t, ops, *g)));
    return end;
  };
  size_t pos = 0, end = 0;
  {
    base::WriterLock lock(&t.mu);
    STRATA_ASSIGN_OR_RETURN(end, plan(0, &groups, &pages));
    file = t.file.get();
  }
  while (pos < ops.size()) {
    Status s = PlanRound(t, file, ops, groups, &r);
    if (s.ok() && r.new_pages > pages.size()) {  // a leaf held more rows than its count
      base::WriterLock lock(&t.mu);
      Result<std::vector<uint32_t>> more = t.Allocate(r.new_pages - pages.size());
      if (more.ok()) {
        pages.insert(pages.end(), more->begin(), more->end());
      } else {
        s = more.status();
      }
    }
    if (s.ok()) {
      r.pages.assign(pages.begin(), pages.begin() + r.new_pages);
      s = WriteRoundPages(t, file, groups, &r);
    }
    if (!s.ok()) {
      base::WriterLock lock(&t.mu);
      t.Unallocate(pages);
      return s;
    }
    size_t next_end = end;
    {
      base::WriterLock lock(&t.mu);
      SwitchRound(t, groups, r, /*user=*/false, ops.subspan(pos, end - pos));
      t.Unallocate(std::span<const uint32_t>(pages).subspan(r.new_pages));
      pages.clear();
      if (end < ops.size()) {
        STRATA_ASSIGN_OR_RETURN(next_end, plan(end, &next_groups, &next_pages));
      }
    }
    t.NotifyProgress();  // room in the log index for waiting puts
    Hook(LogMergePoint::kMergeRound);
    pos = end;
    end = next_end;
    std::swap(groups, next_groups);
    std::swap(pages, next_pages);
  }
  return Status::Ok();
}

Status Store::DrainLogs(Table& t) {
  for (;;) {
    STRATA_RETURN_IF_ERROR(MergeFrozen(t));
    base::WriterLock lock(&t.mu);
    // A put may have frozen the active log since the merge ended (the merge
    // thread then waits for merge_mu): merge that one first.
    if (t.Other().state == LogState::kFrozen) continue;
    if (t.Active().entries == 0) return Status::Ok();
    Freeze(t, /*notify=*/false);
    break;
  }
  return MergeFrozen(t);
}

void Store::MergeThread() {
  for (;;) {
    Table* t = nullptr;
    {
      base::MutexLock lock(&merge_queue_mu_);
      while (merge_queue_.empty() && !stopping_) merge_queue_cv_.Wait(&merge_queue_mu_);
      if (stopping_) return;
      t = merge_queue_.front();
      merge_queue_.erase(merge_queue_.begin());
    }
    MergeLock merge(t);
    const Status s = MergeFrozen(*t);
    {
      // Before the release wakes the puts waiting for this merge: they merge
      // themselves now, unless a log frozen since is queued (Freeze, under
      // t->mu, set the flag for it).
      base::ReaderLock lock(&t->mu);
      if (!s.ok() || t->Other().state != LogState::kFrozen) t->SetMergeQueued(false);
    }
    if (!s.ok()) {
      // The log stays frozen and readable; the next put that needs it merged
      // retries and returns the error.
      STRATA_LOG_WARN("native store %s: background merge of table %s failed: %s",
                      options_.dir.c_str(), t->spec.name.c_str(), s.ToString().c_str());
    }
  }
}

}  // namespace strata::storage::native
