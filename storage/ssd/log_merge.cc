// Format 2 with key ranges (SsdIndex::kRanges; docs/ssd-format.md, "Key
// ranges"): appends through the ranges' own heads, and the background merge
// that folds a range's log into a new key-ordered base (log_row_store.h).
#include <algorithm>

#include "base/assert.h"
#include "storage/ssd/log_store.h"

namespace strata::storage::logstore {

Status Store::AppendRanged(Table& t, std::span<const NewRecord> recs, std::vector<uint64_t>* addrs,
                           const std::function<Status()>& meanwhile,
                           const std::function<void()>& undo_meanwhile) {
  // The runs of one range each.
  struct Run {
    uint32_t range;
    size_t begin, end;
  };
  std::vector<Run> runs;
  for (size_t i = 0; i < recs.size(); ++i) {
    const uint32_t r = t.RangeOf(ssd::MixKey(recs[i].key));
    if (runs.empty() || runs.back().range != r) runs.push_back({r, i, i});
    runs.back().end = i + 1;
  }
  // Plan every run, then write them, then commit: all or nothing.
  size_t planned = 0;
  Status s;
  for (; planned < runs.size() && s.ok(); ++planned) {
    const Run& run = runs[planned];
    Range& rg = t.ranges[run.range];
    s = PlanAppend(t, kRangeHead0 + static_cast<int>(run.range), run.end - run.begin, &rg.plan,
                   &rg.staging);
    if (!s.ok()) break;
  }
  // Every run's blocks are gathered into the table's staging buffer and
  // written in one batch (the device sees the ranges' runs together, not
  // one after another).
  WriteGather gather;
  if (s.ok()) {
    uint64_t bytes = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      for (const AppendPlan::Chunk& c : t.ranges[runs[i].range].plan.chunks) {
        if (c.to > c.from) bytes += c.to - c.from;
      }
    }
    s = EnsureBytes(&t.staging, std::max<uint64_t>(bytes, kBlock));
    gather.data = reinterpret_cast<std::byte*>(t.staging.data());
  }
  for (size_t i = 0; i < runs.size() && s.ok(); ++i) {
    const Run& run = runs[i];
    Range& rg = t.ranges[run.range];
    s = WriteAppend(t, kRangeHead0 + static_cast<int>(run.range), rg.plan,
                    recs.subspan(run.begin, run.end - run.begin),
                    reinterpret_cast<std::byte*>(rg.staging.data()), &gather);
  }
  if (s.ok()) {
    // The records' addresses, for `meanwhile`.
    addrs->resize(recs.size());
    for (const Run& run : runs) {
      size_t r = run.begin;
      for (const AppendPlan::Chunk& c : t.ranges[run.range].plan.chunks) {
        for (uint64_t i = 0; i < c.n; ++i) (*addrs)[r++] = t.Address(c.slot, c.first + i);
      }
    }
    PageFile::PendingWrite write;
    t.file->StartWritePages(gather.pages, gather.data, &write);
    const Status also = meanwhile ? meanwhile() : Status::Ok();
    s = write.Finish();
    if (s.ok()) bytes_written_ += gather.bytes;
    // What `meanwhile` changed is undone before the slots go back.
    if (!s.ok() && also.ok() && undo_meanwhile) undo_meanwhile();
    if (s.ok()) s = also;
  }
  if (!s.ok()) {
    for (size_t i = 0; i < planned; ++i) UndoAppend(t, t.ranges[runs[i].range].plan);
    return s;
  }
  std::vector<uint64_t> run_addrs;  // as computed above
  for (const Run& run : runs) {
    Range& rg = t.ranges[run.range];
    CommitAppend(t, kRangeHead0 + static_cast<int>(run.range), rg.plan,
                 recs.subspan(run.begin, run.end - run.begin),
                 reinterpret_cast<const std::byte*>(rg.staging.data()), &run_addrs);
  }
  return Status::Ok();
}

namespace {

// A segment the merge reads: its slot, extent and seq.
struct MergeInput {
  uint64_t slot;
  uint64_t records;
  uint64_t segment_seq;
};

// A log record of the merged range.
struct LogEntry {
  uint64_t mixed;
  uint64_t seq;
  const std::byte* rec;
  uint8_t kind;
};

}  // namespace

Status Store::MergeStep(Table& t, uint64_t* reclaimed, int32_t* picked,
                        Clock::time_point* retry_at) {
  *reclaimed = 0;
  *picked = -1;
  if (!Failed().ok()) return Status::Ok();  // writes refused: nothing to make room for
  uint32_t range = 0;
  std::vector<MergeInput> logs, bases;
  int64_t delta_at_start = 0;
  {
    // Pick the range with the most log bytes (records) among those not in
    // their back-off; seal its head (its pending blocks written), so that
    // the puts from now on go to a fresh segment and every log record of
    // the range written before is in the segments read below.
    base::WriterLock lock(&t.mu);
    if (!OverTarget(t)) return Status::Ok();
    std::vector<uint64_t> records(t.ranges.size(), 0);
    for (const Slot& slot : t.slots) {
      if ((slot.state == kCurrent || slot.state == kBoth) && slot.role == kRoleLog &&
          slot.range >= 0) {
        records[static_cast<size_t>(slot.range)] += slot.records;
      }
    }
    const Clock::time_point now = Clock::now();
    uint64_t most = 0;
    for (uint32_t r = 0; r < records.size(); ++r) {
      if (records[r] == 0) continue;
      const Retry& retry = t.ranges[r].retry;
      if (retry.failures > 0 && now < retry.at) {
        *retry_at = std::min(*retry_at, retry.at);
        continue;
      }
      if (records[r] > most) {
        most = records[r];
        range = r;
      }
    }
    if (most == 0) return Status::Ok();
    *picked = static_cast<int32_t>(range);
    STRATA_RETURN_IF_ERROR(FlushHead(t, t.heads[kRangeHead0 + range]));
    for (uint64_t s = 0; s < t.slots.size(); ++s) {
      const Slot& slot = t.slots[s];
      if ((slot.state == kCurrent || slot.state == kBoth) && slot.role == kRoleLog &&
          slot.range == static_cast<int32_t>(range)) {
        STRATA_ASSERT(slot.sealed, "a range's log segment is open after its head was sealed");
        logs.push_back({s, slot.records, slot.segment_seq});
      }
    }
    for (const BaseSegment& b : t.ranges[range].base) {
      bases.push_back({b.slot, t.slots[b.slot].records, t.slots[b.slot].segment_seq});
    }
    delta_at_start = t.ranges[range].log_delta;
  }
  Hook(CleanPoint::kMergeStart);
  // The inputs stay until this merge frees them: only merges free a range's
  // segments, and a checkpoint waits for the step. Read the log whole.
  uint64_t log_bytes = 0;
  for (const MergeInput& in : logs) log_bytes += RoundUp(t.RecordOffset(in.records));
  STRATA_RETURN_IF_ERROR(EnsureBytes(&clean_victim_, std::max<uint64_t>(log_bytes, kBlock)));
  auto* log_data = reinterpret_cast<std::byte*>(clean_victim_.data());
  std::vector<LogEntry> entries;
  std::vector<uint32_t> pages;
  // Reads segment `in` whole (one sequential request) and verifies its header.
  auto read_segment = [&](const MergeInput& in, std::byte* data) -> Status {
    const uint64_t bytes = RoundUp(t.RecordOffset(in.records));
    pages.clear();
    for (uint64_t b = 0; b < bytes / kBlock; ++b) {
      pages.push_back(static_cast<uint32_t>(in.slot * t.slot_blocks + b));
    }
    STRATA_RETURN_IF_ERROR(t.file->ReadPages(pages, data));
    bytes_read_ += bytes;
    return VerifySegmentHeader(data, t, in.segment_seq, t.file->path(), in.slot * t.segment_bytes);
  };
  uint64_t log_records = 0;
  for (const MergeInput& in : logs) log_records += in.records;
  // The merge's I/O: its log and base read, its output (at most as large
  // as both) written. Each segment read or written credits its share of
  // the log records the merge frees (Credit), so a write at the stall
  // bound waits for about its own share of the merge, not for all of it
  // (a merge of a range at 20M rows took 265 ms at the median:
  // docs/ssd-format.md).
  uint64_t base_bytes = 0;
  for (const MergeInput& in : bases) base_bytes += RoundUp(t.RecordOffset(in.records));
  const uint64_t work = 2 * (log_bytes + base_bytes);
  uint64_t done = 0, credited = 0;
  auto progress = [&](uint64_t bytes) {
    if (!options_.ssd_background_cleaning || work == 0) return;
    done = std::min(work, done + bytes);
    const uint64_t due =
        static_cast<uint64_t>(static_cast<unsigned __int128>(log_records) * done / work);
    if (due > credited) {
      Credit(t, due - credited);
      credited = due;
    }
  };
  {
    uint64_t at = 0;
    for (const MergeInput& in : logs) {
      std::byte* data = log_data + at;
      STRATA_RETURN_IF_ERROR(read_segment(in, data));
      const uint64_t base = in.slot * t.segment_bytes;
      for (uint64_t i = 0; i < in.records; ++i) {
        Parsed p;
        const std::byte* rec = data + t.RecordOffset(i);
        STRATA_RETURN_IF_ERROR(
            VerifyRecord(rec, t, in.segment_seq, i, t.file->path(), base + t.RecordOffset(i), &p));
        entries.push_back({ssd::MixKey(p.key), p.seq, rec, p.kind});
      }
      at += RoundUp(t.RecordOffset(in.records));
      progress(RoundUp(t.RecordOffset(in.records)));
    }
  }
  Hook(CleanPoint::kVictimRead);
  // Each key's newest log record.
  std::sort(entries.begin(), entries.end(), [](const LogEntry& a, const LogEntry& b) {
    return a.mixed != b.mixed ? a.mixed < b.mixed : a.seq > b.seq;
  });
  entries.erase(
      std::unique(entries.begin(), entries.end(),
                  [](const LogEntry& a, const LogEntry& b) { return a.mixed == b.mixed; }),
      entries.end());

  // The new base, written segment by segment into fresh slots (role
  // kRoleMergeOutput: nothing else sees them until the switch).
  std::vector<BaseSegment> out_base;
  std::vector<uint64_t> out_slots, out_records;
  std::vector<uint64_t> out_mixed;
  uint64_t out_n = 0, out_seq = 0, new_rows = 0;
  int64_t out_slot = -1;
  STRATA_RETURN_IF_ERROR(EnsureBytes(&clean_staging_, t.segment_bytes));
  auto* out = reinterpret_cast<std::byte*>(clean_staging_.data());
  auto finish = [&]() -> Status {
    if (out_slot < 0) return Status::Ok();
    const uint64_t bytes = RoundUp(t.RecordOffset(out_n));
    std::memset(out + t.RecordOffset(out_n), 0, bytes - t.RecordOffset(out_n));
    pages.clear();
    for (uint64_t b = 0; b < bytes / kBlock; ++b) {
      pages.push_back(static_cast<uint32_t>(static_cast<uint64_t>(out_slot) * t.slot_blocks + b));
    }
    STRATA_RETURN_IF_ERROR(t.file->WritePages(pages, out));
    bytes_written_ += bytes;
    progress(bytes);
    out_base.emplace_back();
    out_base.back().slot = static_cast<uint64_t>(out_slot);
    out_base.back().Build(out_mixed);
    out_records.push_back(out_n);
    out_slot = -1;
    return Status::Ok();
  };
  auto emit = [&](Key key, uint64_t mixed, uint64_t seq, const std::byte* row) -> Status {
    if (out_slot >= 0 && out_n == t.capacity) STRATA_RETURN_IF_ERROR(finish());
    if (out_slot < 0) {
      base::WriterLock lock(&t.mu);
      STRATA_ASSIGN_OR_RETURN(uint64_t slot, AllocateSlot(t));
      t.slots[slot].role = kRoleMergeOutput;
      t.slots[slot].range = static_cast<int32_t>(range);
      ++t.merge_slots;
      out_slots.push_back(slot);
      out_slot = static_cast<int64_t>(slot);
      out_seq = t.slots[slot].segment_seq;
      out_n = 0;
      out_mixed.clear();
      SealSegmentHeader(out, t, out_seq, ssd::kSegmentBase, t.Layout(range));
    }
    SealRecord(out + t.RecordOffset(out_n), t, out_seq, out_n, key, seq, ssd::kRecordRow, row);
    out_mixed.push_back(mixed);
    ++out_n;
    ++new_rows;
    return Status::Ok();
  };
  auto emit_log = [&](const LogEntry& e) -> Status {
    if (e.kind != ssd::kRecordRow) return Status::Ok();  // a tombstone drops the key
    return emit(ParseRecord(e.rec).key, e.mixed, e.seq, e.rec + ssd::kRecordHeaderBytes);
  };
  STRATA_RETURN_IF_ERROR(EnsureBytes(&merge_base_, t.segment_bytes));
  auto* data = reinterpret_cast<std::byte*>(merge_base_.data());
  auto merge = [&]() -> Status {
    size_t j = 0;  // next log entry
    uint64_t last_mixed = 0;
    bool any = false;
    for (const MergeInput& in : bases) {
      STRATA_RETURN_IF_ERROR(read_segment(in, data));
      progress(RoundUp(t.RecordOffset(in.records)));
      const uint64_t base = in.slot * t.segment_bytes;
      for (uint64_t i = 0; i < in.records; ++i) {
        Parsed p;
        const std::byte* rec = data + t.RecordOffset(i);
        const uint64_t at = base + t.RecordOffset(i);
        STRATA_RETURN_IF_ERROR(VerifyRecord(rec, t, in.segment_seq, i, t.file->path(), at, &p));
        const uint64_t mixed = ssd::MixKey(p.key);
        if (p.kind != ssd::kRecordRow || (any && mixed <= last_mixed)) {
          return CorruptionAt(t.file->path(), at,
                              "base record of key " + std::to_string(p.key) +
                                  " out of key order or not a row (table " + t.spec.name + ")");
        }
        any = true;
        last_mixed = mixed;
        for (; j < entries.size() && entries[j].mixed < mixed; ++j) {
          STRATA_RETURN_IF_ERROR(emit_log(entries[j]));
        }
        if (j < entries.size() && entries[j].mixed == mixed && entries[j].seq > p.seq) {
          STRATA_RETURN_IF_ERROR(emit_log(entries[j++]));  // the log's is newer
          continue;
        }
        if (j < entries.size() && entries[j].mixed == mixed) ++j;  // older than the base's
        STRATA_RETURN_IF_ERROR(emit(p.key, mixed, p.seq, rec + ssd::kRecordHeaderBytes));
      }
    }
    for (; j < entries.size(); ++j) STRATA_RETURN_IF_ERROR(emit_log(entries[j]));
    return finish();
  };
  if (Status s = merge(); !s.ok()) {
    base::WriterLock lock(&t.mu);
    for (uint64_t slot : out_slots) t.SetState(slot, kFree);
    return s;
  }
  Hook(CleanPoint::kMergeWritten);

  // Switch: the range's base is the new one; the log's entries the merge
  // took leave the index (an entry a put changed meanwhile stays: it is
  // newer); the old segments are released (checkpoint-only while the
  // durable MANIFEST names them: the new home is written first).
  base::WriterLock lock(&t.mu);
  // An entry names a merged record exactly when it names a record of a
  // merged log segment (a put since names its new record elsewhere): one
  // pass over the range's partitions drops those, where an erase per entry
  // (a search each, and a move of its partition's tail) held the lock 8 ms
  // at the median and 70 ms at most at 20M rows (docs/ssd-format.md).
  std::vector<uint64_t> merged(logs.size());
  for (size_t i = 0; i < logs.size(); ++i) merged[i] = logs[i].slot;
  std::sort(merged.begin(), merged.end());
  const uint64_t span_first = t.range_bits == 0 ? 0 : uint64_t{range} << (64 - t.range_bits);
  const uint64_t span_last =
      t.range_bits == 0 ? ~uint64_t{0} : span_first | (~uint64_t{0} >> t.range_bits);
  // Counted here, applied below (the predicate runs inside the index).
  std::vector<uint32_t> dropped(merged.size(), 0);
  uint64_t dropped_tombstones = 0;
  t.index.EraseWhere(span_first, span_last, [&](uint64_t address, uint8_t kind) {
    const auto at = std::lower_bound(merged.begin(), merged.end(), t.SlotOf(address));
    if (at == merged.end() || *at != t.SlotOf(address)) return false;
    ++dropped[static_cast<size_t>(at - merged.begin())];
    if (kind != ssd::kRecordRow) ++dropped_tombstones;
    return true;
  });
  for (size_t i = 0; i < merged.size(); ++i) t.slots[merged[i]].live -= dropped[i];
  t.tombstones -= dropped_tombstones;
  for (const MergeInput& in : logs) {
    STRATA_ASSERT(t.slots[in.slot].live == 0, "a merged log segment is still named by the index");
    Release(t, in.slot);
  }
  for (const MergeInput& in : bases) Release(t, in.slot);
  for (size_t i = 0; i < out_slots.size(); ++i) {
    Slot& slot = t.slots[out_slots[i]];
    slot.role = kRoleBase;
    slot.records = static_cast<uint32_t>(out_records[i]);
    slot.live = slot.records;
    slot.sealed = true;
    --t.merge_slots;
    ++t.base_slots;
  }
  Range& rg = t.ranges[range];
  const int64_t rows = static_cast<int64_t>(t.rows) - static_cast<int64_t>(rg.base_rows) -
                       delta_at_start + static_cast<int64_t>(new_rows);
  t.rows = static_cast<uint64_t>(std::max<int64_t>(rows, 0));
  rg.log_delta -= delta_at_start;
  rg.base_rows = new_rows;
  rg.base = std::move(out_base);
  *reclaimed = std::max<uint64_t>(log_records, 1);
  return Status::Ok();
}

}  // namespace strata::storage::logstore
