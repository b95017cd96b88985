// Native store, format version 2: an append-only log of segments per table
// with a compact per-key index (log_row_store.h, docs/ssd-format.md).
#include "storage/ssd/log_row_store.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "base/assert.h"
#include "base/log.h"
#include "storage/ssd/limits.h"
#include "storage/ssd/log_store.h"

namespace strata::storage {
namespace logstore {
namespace {

// A session's segment seqs start this far above the MANIFEST's
// next_segment_seq, so a segment a crashed session wrote after the
// checkpoint never shares its seq (and so its record seeds) with one
// written after the reopen.
constexpr uint64_t kSessionSegmentSeqStep = uint64_t{1} << 32;

}  // namespace

// Encodes a record (a tombstone when `row` is null) at `dst`, record_bytes.
void SealRecord(std::byte* dst, const Table& t, uint64_t segment_seq, uint64_t index, Key key,
                uint64_t seq, uint8_t kind, const std::byte* row) {
  const uint32_t rb = t.spec.row_bytes;
  ssd::RecordHeader h{0, key, seq | uint64_t{kind} << 48};
  std::memcpy(dst, &h, sizeof(h));
  if (row != nullptr) {
    std::memcpy(dst + ssd::kRecordHeaderBytes, row, rb);
  } else {
    std::memset(dst + ssd::kRecordHeaderBytes, 0, rb);
  }
  std::memset(dst + ssd::kRecordHeaderBytes + rb, 0, t.record_bytes - ssd::kRecordHeaderBytes - rb);
  h.checksum = XXH3_64bits_withSeed(dst + 8, ssd::kRecordHeaderBytes - 8 + rb,
                                    ssd::RecordSeed(t.spec.id, segment_seq, index));
  std::memcpy(dst, &h.checksum, 8);
}

Status CorruptionAt(const std::string& path, uint64_t offset, const std::string& what) {
  return Status::Corruption(path + " offset " + std::to_string(offset) + ": " + what);
}

// Verifies the record at `src` (record `index` of segment `segment_seq`),
// read from `path` at `offset`.
Status VerifyRecord(const std::byte* src, const Table& t, uint64_t segment_seq, uint64_t index,
                    const std::string& path, uint64_t offset, Parsed* out) {
  ssd::RecordHeader h;
  std::memcpy(&h, src, sizeof(h));
  // Built only for an error: every get and merge verifies records.
  auto where = [&] {
    return " (table " + t.spec.name + ", segment seq " + std::to_string(segment_seq) + ", record " +
           std::to_string(index) + ")";
  };
  if (XXH3_64bits_withSeed(src + 8, ssd::kRecordHeaderBytes - 8 + t.spec.row_bytes,
                           ssd::RecordSeed(t.spec.id, segment_seq, index)) != h.checksum) {
    return CorruptionAt(path, offset, "record checksum mismatch" + where());
  }
  *out = ParseRecord(src);
  if (out->kind != ssd::kRecordRow && out->kind != ssd::kRecordTombstone) {
    return CorruptionAt(path, offset, "record kind " + std::to_string(out->kind) + where());
  }
  return Status::Ok();
}

void SealSegmentHeader(std::byte* dst, const Table& t, uint64_t segment_seq, uint16_t kind,
                       uint32_t layout) {
  std::memset(dst, 0, kHeader);
  ssd::SegmentHeader h{};
  h.magic = ssd::kSegmentMagic;
  h.version = ssd::kFormatVersion2;
  h.kind = kind;
  h.table_id = t.spec.id;
  h.row_bytes = t.spec.row_bytes;
  h.record_bytes = t.record_bytes;
  h.segment_seq = segment_seq;
  h.layout = layout;
  std::memcpy(dst, &h, sizeof(h));
  h.checksum = XXH3_64bits(dst + 8, kHeader - 8);
  std::memcpy(dst, &h.checksum, 8);
}

Status VerifySegmentHeader(const std::byte* src, const Table& t, uint64_t segment_seq,
                           const std::string& path, uint64_t offset) {
  ssd::SegmentHeader h;
  std::memcpy(&h, src, sizeof(h));
  if (XXH3_64bits(src + 8, kHeader - 8) != h.checksum || h.magic != ssd::kSegmentMagic ||
      h.version != ssd::kFormatVersion2 || h.table_id != t.spec.id ||
      h.row_bytes != t.spec.row_bytes || h.record_bytes != t.record_bytes ||
      h.segment_seq != segment_seq) {
    return CorruptionAt(path, offset,
                        "bad segment header (table " + t.spec.name + ", segment seq " +
                            std::to_string(segment_seq) + ")");
  }
  return Status::Ok();
}

Status EnsureBytes(io::AlignedBuffer* buf, size_t bytes) {
  if (buf->size() >= bytes) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(*buf, io::AlignedBuffer::Allocate(std::max(bytes, buf->size() * 2)));
  return Status::Ok();
}

Result<Table*> Store::Find(TableId table) const {
  STRATA_RETURN_IF_ERROR(Failed());
  for (const auto& t : tables_) {
    if (t->spec.id == table) return t.get();
  }
  return Status::InvalidArgument(options_.dir + ": unknown table id " + std::to_string(table));
}

Status Store::Failed() const { return failure_.Get(); }

void Store::Fail(const Status& cause) { failure_.Set(options_.dir, cause); }

bool Store::NoteCleanup(const Status& s) {
  if (s.ok()) return true;
  if (cleanup_errors_.fetch_add(1) == 0) {
    STRATA_LOG_WARN("native store %s: cleanup after a durable checkpoint failed: %s",
                    options_.dir.c_str(), s.ToString().c_str());
  }
  return false;
}

std::unique_ptr<Table> Store::NewTable(const TableSpec& spec, uint64_t segment_bytes) {
  auto t = std::make_unique<Table>(options_.ssd_index);
  t->spec = spec;
  t->record_bytes = ssd::RecordBytes(spec.row_bytes);
  t->segment_bytes = segment_bytes;
  t->capacity = SegmentCapacity(segment_bytes, spec.row_bytes);
  t->slot_blocks = segment_bytes / kBlock;
  base::WriterLock lock(&t->mu);  // not shared yet; for the analysis
  ConfigureLayout(*t, options_.ssd_index == SsdIndex::kRanges,
                  RangeBitsFor(spec, options_.ssd_range_bits));
  return t;
}

void Store::ConfigureLayout(Table& t, bool ranged, uint32_t range_bits) {
  t.ranged = ranged;
  t.range_bits = ranged ? range_bits : 0;
  // A table of key ranges indexes its log exactly; one without ranges
  // opened with kRanges asked uses the exact index too.
  t.index.Reset(ranged || options_.ssd_index == SsdIndex::kRanges ? SsdIndex::kExact
                                                                  : options_.ssd_index);
  const size_t ranges = ranged ? size_t{1} << range_bits : 0;
  t.ranges.clear();
  t.ranges.resize(ranges);
  t.heads.clear();
  t.heads.resize(kRangeHead0 + ranges);
  for (size_t r = 0; r < ranges; ++r) t.heads[kRangeHead0 + r].hold = kRangeHeadHoldBytes;
}

uint32_t RangeBitsFor(const TableSpec& spec, uint32_t range_bits) {
  if (spec.rows_hint == 0) return range_bits;
  const unsigned __int128 bytes =
      static_cast<unsigned __int128>(spec.rows_hint) * ssd::RecordBytes(spec.row_bytes);
  uint32_t bits = 0;
  while (bits < kRangeBitsMax && (bytes >> bits) > kSsdRangeRecordBytes) ++bits;
  return bits;
}

namespace {

// The segment size of a new table: the option, doubled until a segment
// holds kRecordsPerSegmentMin records (rows up to kRowBytesMax fit 64 MiB).
uint64_t SegmentBytesFor(uint64_t option, uint32_t row_bytes) {
  constexpr uint64_t kRecordsPerSegmentMin = 8;
  uint64_t bytes = option;
  while (bytes < kSegmentBytesMax && SegmentCapacity(bytes, row_bytes) < kRecordsPerSegmentMin) {
    bytes *= 2;
  }
  return bytes;
}

}  // namespace

Status Store::Open(const std::vector<TableSpec>& tables) {
  STRATA_RETURN_IF_ERROR(env_->CreateDirs(options_.dir));
  io_threads_ = StartStoreIoThreads(options_, env_);  // null: File::Read/Write
  STRATA_ASSIGN_OR_RETURN(std::optional<ManifestV2> manifest, ReadManifestV2(env_, options_.dir));
  if (manifest) return OpenExisting(*manifest, tables);
  STRATA_RETURN_IF_ERROR(RefuseOrphanedData(env_, options_.dir, [](std::string_view n) {
    return ssd::IsLogDataFileName(n) || ssd::IsDataFileName(n);
  }));
  specs_ = tables;
  for (const TableSpec& spec : tables) {
    auto t = NewTable(spec, SegmentBytesFor(options_.ssd_segment_bytes, spec.row_bytes));
    base::WriterLock lock(&t->mu);  // not shared yet; for the analysis
    STRATA_ASSIGN_OR_RETURN(
        t->file, PageFile::Open(env_, options_.dir + "/" + ssd::LogDataFileName(spec.id, 1), kBlock,
                                /*create=*/true, options_.direct_io, io_threads_.get()));
    tables_.push_back(std::move(t));
  }
  return Checkpoint({});
}

Status Store::OpenExisting(const ManifestV2& manifest, const std::vector<TableSpec>& tables) {
  const std::string mpath = options_.dir + "/" + ssd::kManifestName;
  std::vector<TableSpec> stored;
  for (const ManifestTableV2& mt : manifest.tables) stored.push_back(mt.spec);
  STRATA_RETURN_IF_ERROR(CompareTableSpecs(stored, tables, options_.dir));
  std::set<std::string> referenced{ssd::kManifestName};
  // Validate everything before changing any file.
  for (const ManifestTableV2& mt : manifest.tables) {
    // The stored spec, with the size hint asked now (for a table still
    // without a segment, whose layout is chosen at its first).
    TableSpec spec = mt.spec;
    for (const TableSpec& asked : tables) {
      if (asked.id == spec.id) spec.rows_hint = asked.rows_hint;
    }
    auto t = NewTable(spec, mt.segment_bytes);
    base::WriterLock lock(&t->mu);  // not shared yet; for the analysis
    t->file_number = mt.file_number;
    t->next_seq = mt.next_seq;
    t->next_segment_seq = mt.next_segment_seq + kSessionSegmentSeqStep;
    const std::string name = ssd::LogDataFileName(mt.spec.id, mt.file_number);
    referenced.insert(name);
    const std::string path = options_.dir + "/" + name;
    const bool exists = env_->FileExists(path);
    if (!exists && !mt.segments.empty()) {
      return Status::Corruption(mpath + ": log file " + path + " is missing");
    }
    STRATA_ASSIGN_OR_RETURN(t->file, PageFile::Open(env_, path, kBlock, /*create=*/!exists,
                                                    options_.direct_io, io_threads_.get()));
    STRATA_ASSIGN_OR_RETURN(uint64_t blocks, t->file->PageCount());
    for (size_t i = 0; i < mt.segments.size(); ++i) {
      const ssd::SegmentRecord& s = mt.segments[i];
      if (s.slot * t->slot_blocks + RoundUp(t->RecordOffset(s.record_count)) / kBlock > blocks) {
        return CorruptionAt(mpath, mt.segments_offset + i * sizeof(ssd::SegmentRecord),
                            "table " + mt.spec.name + " segment in slot " + std::to_string(s.slot) +
                                " lies beyond its log file " + path);
      }
    }
    STRATA_RETURN_IF_ERROR(Rebuild(*t, mt, mpath));
    tables_.push_back(std::move(t));
  }
  specs_ = stored;
  {
    base::MutexLock checkpoint_lock(&checkpoint_mu_);
    generation_ = manifest.generation;
  }
  {
    base::MutexLock meta_lock(&meta_mu_);
    meta_ = manifest.meta;
  }
  // The MANIFEST read may be one whose rename was never made durable: make
  // it durable before truncating or deleting what only the previous one named.
  if (Status s = env_->SyncDir(options_.dir); !s.ok()) {
    return s.WithContext("making " + mpath + " durable before recovery");
  }
  for (auto& t : tables_) {
    base::WriterLock lock(&t->mu);
    STRATA_RETURN_IF_ERROR(t->file->TruncatePages(t->slots.size() * t->slot_blocks));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(options_.dir));
  for (const std::string& name : names) {
    const bool ours = name == ssd::kManifestTmpName || ssd::IsLogDataFileName(name);
    if (ours && referenced.count(name) == 0) {
      STRATA_RETURN_IF_ERROR(env_->DeleteFile(options_.dir + "/" + name));
    }
  }
  return Status::Ok();
}

Status Store::Rebuild(Table& t, const ManifestTableV2& mt, const std::string& mpath) {
  struct Seen {
    uint64_t mixed;
    uint64_t seq;
    uint64_t address;
    uint8_t kind;
  };
  std::vector<Seen> seen;
  std::vector<uint64_t> base_keys;  // key ranges: the mixed keys of every base record
  std::vector<uint64_t> mixed;      // of one base segment
  std::vector<ssd::SegmentRecord> segments = mt.segments;
  std::sort(
      segments.begin(), segments.end(),
      [](const ssd::SegmentRecord& a, const ssd::SegmentRecord& b) { return a.slot < b.slot; });
  uint64_t slots = 0;
  for (const ssd::SegmentRecord& s : segments) slots = std::max<uint64_t>(slots, s.slot + 1);
  t.slots.assign(slots, Slot{});
  std::vector<uint32_t> pages;
  bool first_segment = true;
  uint32_t layout = 0;
  for (const ssd::SegmentRecord& s : segments) {
    const uint64_t bytes = RoundUp(t.RecordOffset(s.record_count));
    STRATA_RETURN_IF_ERROR(EnsureBytes(&t.victim, bytes));
    pages.clear();
    for (uint64_t b = 0; b < bytes / kBlock; ++b) {
      pages.push_back(static_cast<uint32_t>(s.slot * t.slot_blocks + b));
    }
    auto* data = reinterpret_cast<std::byte*>(t.victim.data());
    STRATA_RETURN_IF_ERROR(t.file->ReadPages(pages, data));
    bytes_read_ += bytes;
    const uint64_t base = uint64_t{s.slot} * t.segment_bytes;
    STRATA_RETURN_IF_ERROR(VerifySegmentHeader(data, t, s.segment_seq, t.file->path(), base));
    ssd::SegmentHeader header;
    std::memcpy(&header, data, sizeof(header));
    // A table keeps the layout its segments were written in (key ranges or
    // not), whatever the options ask.
    if (first_segment) {
      layout = header.layout;
      const bool ranged = (layout & ssd::kLayoutRanges) != 0;
      if (ranged && (ssd::LayoutRangeBits(layout) > kRangeBitsMax ||
                     (layout & ~ssd::RangesLayout(ssd::LayoutRangeBits(layout), 0xFFFF)) != 0)) {
        return CorruptionAt(t.file->path(), base, "bad segment layout of table " + t.spec.name);
      }
      ConfigureLayout(t, ranged, ssd::LayoutRangeBits(layout));
      first_segment = false;
    }
    const uint32_t range = ssd::LayoutRange(header.layout);
    const bool is_base = header.kind == ssd::kSegmentBase;
    if (((header.layout ^ layout) & ~uint32_t{0xFFFF}) != 0 ||
        (t.ranged && range >= t.ranges.size()) || (!t.ranged && header.layout != 0) ||
        (is_base && !t.ranged)) {
      return CorruptionAt(t.file->path(), base,
                          "segment layout " + std::to_string(header.layout) + " of table " +
                              t.spec.name + " differs from its first segment's " +
                              std::to_string(layout));
    }
    Slot& slot = t.slots[s.slot];
    slot.segment_seq = s.segment_seq;
    slot.records = s.record_count;
    slot.sealed = true;
    if (t.ranged) slot.range = static_cast<int32_t>(range);
    mixed.clear();
    for (uint64_t i = 0; i < s.record_count; ++i) {
      Parsed p;
      const uint64_t at = base + t.RecordOffset(i);
      STRATA_RETURN_IF_ERROR(
          VerifyRecord(data + t.RecordOffset(i), t, s.segment_seq, i, t.file->path(), at, &p));
      if (p.seq >= mt.next_seq) {
        return CorruptionAt(
            t.file->path(), at,
            "record seq " + std::to_string(p.seq) + " not below " + mpath + "'s next_seq");
      }
      const uint64_t m = ssd::MixKey(p.key);
      if (t.ranged && t.RangeOf(m) != range) {
        return CorruptionAt(t.file->path(), at,
                            "record of key " + std::to_string(p.key) + " in a segment of range " +
                                std::to_string(range) + " of table " + t.spec.name);
      }
      slot.min_seq = std::min(slot.min_seq, p.seq);
      if (is_base) {
        if (p.kind != ssd::kRecordRow || (!mixed.empty() && m <= mixed.back())) {
          return CorruptionAt(t.file->path(), at,
                              "base record of key " + std::to_string(p.key) +
                                  " out of key order or not a row (table " + t.spec.name + ")");
        }
        mixed.push_back(m);
        continue;
      }
      seen.push_back({m, p.seq, t.Address(s.slot, i), p.kind});
    }
    if (is_base) {
      slot.role = kRoleBase;
      slot.live = s.record_count;
      ++t.base_slots;
      Range& rg = t.ranges[range];
      rg.base_rows += s.record_count;
      if (!mixed.empty()) {
        rg.base.emplace_back();
        rg.base.back().slot = s.slot;
        rg.base.back().Build(mixed);
      }
      base_keys.insert(base_keys.end(), mixed.begin(), mixed.end());
    }
    t.SetState(s.slot, kBoth);
  }
  if (first_segment) {
    ConfigureLayout(t, options_.ssd_index == SsdIndex::kRanges,
                    RangeBitsFor(t.spec, options_.ssd_range_bits));
  }
  for (Range& rg : t.ranges) {
    std::sort(rg.base.begin(), rg.base.end(),
              [](const BaseSegment& a, const BaseSegment& b) { return a.first < b.first; });
    for (size_t i = 1; i < rg.base.size(); ++i) {
      if (rg.base[i].first <= rg.base[i - 1].last) {
        return CorruptionAt(t.file->path(), rg.base[i].slot * t.segment_bytes,
                            "base segments of table " + t.spec.name + " overlap in key order");
      }
    }
    t.rows += rg.base_rows;
  }
  std::sort(base_keys.begin(), base_keys.end());
  // A key's newest record wins (highest seq: a cleaner copy may sit in a
  // newer segment than a later put of the key). Key ranges: the log's
  // records are newer than their range's base (a merge takes every log
  // record of the range written before it), so the index holds the log's
  // winners, each shadowing the key's base record if it has one.
  std::sort(seen.begin(), seen.end(), [](const Seen& a, const Seen& b) {
    return a.mixed != b.mixed ? a.mixed < b.mixed : a.seq > b.seq;
  });
  std::vector<TableIndex::BuildEntry> entries;
  entries.reserve(seen.size());
  for (size_t i = 0; i < seen.size(); ++i) {
    if (i > 0 && seen[i].mixed == seen[i - 1].mixed) continue;
    entries.push_back({seen[i].mixed, seen[i].address, seen[i].kind});
    ++t.slots[t.SlotOf(seen[i].address)].live;
    const bool row = seen[i].kind == ssd::kRecordRow;
    if (t.ranged) {
      const int64_t d = int64_t{row} - int64_t{std::binary_search(base_keys.begin(),
                                                                  base_keys.end(), seen[i].mixed)};
      t.ranges[t.RangeOf(seen[i].mixed)].log_delta += d;
      t.rows = static_cast<uint64_t>(static_cast<int64_t>(t.rows) + d);
    } else if (row) {
      ++t.rows;
    }
    if (!row) ++t.tombstones;
  }
  seen.clear();
  seen.shrink_to_fit();
  // Key ranges: the MANIFEST's count is the estimate of "Range::log_delta";
  // the rebuild's is exact.
  if (!t.ranged && t.rows != mt.row_count) {
    return Status::Corruption(mpath + ": table " + t.spec.name + " row count " +
                              std::to_string(mt.row_count) + ", its segments hold " +
                              std::to_string(t.rows));
  }
  t.index.Build(entries);
  t.free_hint = 0;
  return Status::Ok();
}

Result<uint64_t> Store::AllocateSlot(Table& t) {
  uint64_t s = t.free_hint;
  while (s < t.slots.size() && t.slots[s].state != kFree) ++s;
  if (s == t.slots.size()) {
    if (s >= kLogSlotsMax || t.Address(s + 1, 0) - 1 > TableIndex::kAddressMax) {
      return Status::ResourceExhausted(t.file->path() + ": table " + t.spec.name +
                                       " needs more than kLogSlotsMax segments");
    }
    t.slots.emplace_back();
  }
  t.free_hint = s + 1;
  t.SetState(s, kCurrent);
  t.slots[s].segment_seq = t.next_segment_seq++;
  return s;
}

Status Store::PlanAppend(Table& t, int which, size_t n, AppendPlan* plan,
                         io::AlignedBuffer* staging) {
  Head& h = t.heads[which];
  if (h.pend.size() == 0) {
    // At most a record and two blocks are pending (see Head).
    STRATA_ASSIGN_OR_RETURN(
        h.pend, io::AlignedBuffer::Allocate(h.hold + RoundUp(t.record_bytes) + 3 * kBlock));
  }
  plan->chunks.clear();
  plan->taken.clear();
  plan->staged = 0;
  int64_t slot = h.slot;
  for (size_t done = 0; done < n;) {
    AppendPlan::Chunk c{};
    if (slot < 0) {
      auto s = AllocateSlot(t);
      if (!s.ok()) {
        UndoAppend(t, *plan);
        return s.status();
      }
      plan->taken.push_back(*s);
      if (which >= kRangeHead0) t.slots[*s].range = which - kRangeHead0;
      c = {*s, t.slots[*s].segment_seq, true, 0, 0, 0, 0, 0, 0};
    } else {
      const uint64_t us = static_cast<uint64_t>(slot);
      c = {us, t.slots[us].segment_seq, false, t.slots[us].records, 0, h.pend_off, h.written, 0, 0};
    }
    c.n = std::min<uint64_t>(n - done, t.capacity - c.first);
    const uint64_t end = t.RecordOffset(c.first + c.n);
    const bool full = c.first + c.n == t.capacity;
    c.to = full ? RoundUp(end) : RoundDown(end);
    // A head that holds pending blocks writes once they pass its hold.
    if (!full && RoundUp(end) - c.base <= h.hold) c.to = c.from;
    c.at = plan->staged;
    plan->staged += RoundUp(end) - c.base;
    plan->chunks.push_back(c);
    done += c.n;
    slot = full ? -1 : static_cast<int64_t>(c.slot);
  }
  if (Status s = EnsureBytes(staging, plan->staged); !s.ok()) {
    UndoAppend(t, *plan);
    return s;
  }
  // The head's pending bytes before the first new record.
  const AppendPlan::Chunk& c = plan->chunks.front();
  if (!c.fresh) std::memcpy(staging->data(), h.pend.data(), t.RecordOffset(c.first) - c.base);
  return Status::Ok();
}

Status Store::WriteAppend(const Table& t, int which, const AppendPlan& plan,
                          std::span<const NewRecord> recs, std::byte* staging,
                          WriteGather* gather) {
  size_t r = 0;
  std::vector<uint32_t> pages;
  for (const AppendPlan::Chunk& c : plan.chunks) {
    std::byte* dst = staging + c.at;
    const uint64_t end = t.RecordOffset(c.first + c.n);
    if (c.fresh) {
      SealSegmentHeader(dst, t, c.segment_seq,
                        which == kCleanerHead ? ssd::kSegmentCleaner : ssd::kSegmentUser,
                        which >= kRangeHead0 ? t.Layout(which - kRangeHead0) : 0);
    }
    for (uint64_t i = 0; i < c.n; ++i, ++r) {
      const NewRecord& rec = recs[r];
      SealRecord(dst + (t.RecordOffset(c.first + i) - c.base), t, c.segment_seq, c.first + i,
                 rec.key, rec.seq, rec.kind, rec.row);
    }
    std::memset(dst + (end - c.base), 0, RoundUp(end) - end);
    if (c.to <= c.from) continue;
    if (gather != nullptr) {  // the caller writes every append's blocks at once
      for (uint64_t b = c.from / kBlock; b < c.to / kBlock; ++b) {
        gather->pages.push_back(static_cast<uint32_t>(c.slot * t.slot_blocks + b));
      }
      std::memcpy(gather->data + gather->bytes, dst + (c.from - c.base), c.to - c.from);
      gather->bytes += c.to - c.from;
      continue;
    }
    pages.clear();
    for (uint64_t b = c.from / kBlock; b < c.to / kBlock; ++b) {
      pages.push_back(static_cast<uint32_t>(c.slot * t.slot_blocks + b));
    }
    STRATA_RETURN_IF_ERROR(t.file->WritePages(pages, dst + (c.from - c.base)));
    bytes_written_ += c.to - c.from;
  }
  return Status::Ok();
}

void Store::UndoAppend(Table& t, const AppendPlan& plan) {
  for (uint64_t s : plan.taken) t.SetState(s, kFree);
}

void Store::CommitAppend(Table& t, int which, const AppendPlan& plan,
                         std::span<const NewRecord> recs, const std::byte* staging,
                         std::vector<uint64_t>* addrs) {
  Head& h = t.heads[which];
  addrs->resize(recs.size());
  size_t r = 0;
  for (const AppendPlan::Chunk& c : plan.chunks) {
    Slot& s = t.slots[c.slot];
    for (uint64_t i = 0; i < c.n; ++i, ++r) {
      (*addrs)[r] = t.Address(c.slot, c.first + i);
      s.min_seq = std::min(s.min_seq, recs[r].seq);
    }
    s.records = static_cast<uint32_t>(c.first + c.n);
  }
  const AppendPlan::Chunk& last = plan.chunks.back();
  if (last.first + last.n == t.capacity) {
    for (const AppendPlan::Chunk& c : plan.chunks) t.slots[c.slot].sealed = true;
    h.slot = -1;
    return;
  }
  for (size_t i = 0; i + 1 < plan.chunks.size(); ++i) t.slots[plan.chunks[i].slot].sealed = true;
  h.slot = static_cast<int64_t>(last.slot);
  h.written = last.to;
  // The first record not wholly on disk, and the block where it starts.
  const uint64_t first_pending = h.written > kHeader ? (h.written - kHeader) / t.record_bytes : 0;
  const uint64_t pend_off = std::min(RoundDown(t.RecordOffset(first_pending)), h.written);
  const uint64_t end = t.RecordOffset(last.first + last.n);
  const uint64_t keep = RoundUp(end) - pend_off;
  STRATA_ASSERT(keep <= h.pend.size(), "pending bytes above a record and two blocks");
  std::memcpy(h.pend.data(), staging + last.at + (pend_off - last.base), keep);
  h.pend_off = pend_off;
}

Status Store::Append(Table& t, int which, std::span<const NewRecord> recs,
                     std::vector<uint64_t>* addrs) {
  AppendPlan& plan = t.plan;
  STRATA_RETURN_IF_ERROR(PlanAppend(t, which, recs.size(), &plan, &t.staging));
  auto* staging = reinterpret_cast<std::byte*>(t.staging.data());
  if (Status s = WriteAppend(t, which, plan, recs, staging); !s.ok()) {
    UndoAppend(t, plan);
    return s;
  }
  CommitAppend(t, which, plan, recs, staging, addrs);
  return Status::Ok();
}

Status Store::ReadRecords(Table& t, std::span<const uint64_t> addrs, io::AlignedBuffer* buf,
                          std::vector<const std::byte*>* where, std::vector<Parsed>* parsed) {
  where->assign(addrs.size(), nullptr);
  parsed->assign(addrs.size(), Parsed{});
  std::vector<uint32_t> pages;
  std::vector<size_t> first_page(addrs.size(), 0);
  for (size_t i = 0; i < addrs.size(); ++i) {
    if (const std::byte* p = t.InPend(addrs[i]); p != nullptr) {
      (*where)[i] = p;
      continue;
    }
    const uint64_t off = t.FileOffset(addrs[i]);
    uint64_t b = off / kBlock;
    first_page[i] = pages.size();
    // Key ranges: consecutive records sharing a block (a base's candidates)
    // read it once.
    if (t.ranged && !pages.empty() && pages.back() == b) {
      --first_page[i];
      ++b;
    }
    for (; b <= (off + t.record_bytes - 1) / kBlock; ++b) {
      pages.push_back(static_cast<uint32_t>(b));
    }
  }
  if (!pages.empty()) {
    STRATA_RETURN_IF_ERROR(EnsureBytes(buf, pages.size() * kBlock));
    STRATA_RETURN_IF_ERROR(t.file->ReadPages(pages, reinterpret_cast<std::byte*>(buf->data())));
    bytes_read_ += pages.size() * kBlock;
  }
  for (size_t i = 0; i < addrs.size(); ++i) {
    const uint64_t off = t.FileOffset(addrs[i]);
    if ((*where)[i] == nullptr) {
      (*where)[i] =
          reinterpret_cast<const std::byte*>(buf->data()) + first_page[i] * kBlock + off % kBlock;
    }
    const uint64_t slot = t.SlotOf(addrs[i]);
    STRATA_RETURN_IF_ERROR(VerifyRecord((*where)[i], t, t.slots[slot].segment_seq,
                                        t.IndexOf(addrs[i]), t.file->path(), off, &(*parsed)[i]));
  }
  return Status::Ok();
}

namespace {

io::AlignedBuffer* GetScratch() {
  thread_local io::AlignedBuffer buf;
  return &buf;
}

}  // namespace

Status Store::MultiGet(TableId table, std::span<const Key> keys, std::span<std::byte> rows,
                       std::span<uint8_t> found) {
  STRATA_ASSIGN_OR_RETURN(Table * t, Find(table));
  const uint32_t rb = t->spec.row_bytes;
  if (rows.size() != keys.size() * rb || found.size() != keys.size()) {
    return Status::InvalidArgument("MultiGet table " + t->spec.name +
                                   ": rows/found spans do not match keys");
  }
  std::vector<uint64_t> addrs;
  std::vector<uint32_t> owner;     // key index of each candidate
  std::vector<uint8_t> from_base;  // key ranges: 1 for a base's candidates
  addrs.reserve(keys.size());
  owner.reserve(keys.size());
  base::ReaderLock lock(&t->mu);
  for (size_t i = 0; i < keys.size(); ++i) {
    found[i] = 0;
    const uint64_t mixed = ssd::MixKey(keys[i]);
    uint64_t addr = 0;
    uint8_t kind = 0;
    if (!t->index.exact()) {
      t->index.AppendCandidates(mixed, &addrs);
    } else if (t->index.Find(mixed, &addr, &kind)) {
      if (kind == ssd::kRecordRow) addrs.push_back(addr);  // a deleted key reads nothing
    } else if (t->ranged) {
      // Not in the log: the records of its range's base that may hold it.
      const size_t before = addrs.size();
      if (const BaseSegment* b = t->ranges[t->RangeOf(mixed)].Find(mixed)) {
        uint64_t lo = 0, hi = 0;
        b->Candidates(mixed, &lo, &hi);
        for (uint64_t r = lo; r < hi; ++r) addrs.push_back(t->Address(b->slot, r));
      }
      from_base.resize(before, 0);
      from_base.resize(addrs.size(), 1);
    }
    owner.resize(addrs.size(), static_cast<uint32_t>(i));
  }
  from_base.resize(addrs.size(), 0);
  std::vector<const std::byte*> where;
  std::vector<Parsed> parsed;
  STRATA_RETURN_IF_ERROR(ReadRecords(*t, addrs, GetScratch(), &where, &parsed));
  for (size_t c = 0; c < addrs.size(); ++c) {
    const uint32_t i = owner[c];
    if (parsed[c].key != keys[i]) {
      if (!t->index.exact() || from_base[c] != 0) continue;  // another key of the same field
      return CorruptionAt(t->file->path(), t->FileOffset(addrs[c]),
                          "record of key " + std::to_string(parsed[c].key) + " where table " +
                              t->spec.name + "'s index names key " + std::to_string(keys[i]));
    }
    if (parsed[c].kind == ssd::kRecordRow) {
      std::memcpy(rows.data() + uint64_t{i} * rb, where[c] + ssd::kRecordHeaderBytes, rb);
      found[i] = 1;
    }
  }
  rows_read_ += keys.size();
  return Status::Ok();
}

Status Store::Resolve(Table& t, std::span<const Key> keys, std::vector<uint64_t>* old_addrs,
                      std::vector<uint8_t>* old_kinds, io::AlignedBuffer* buf) {
  old_addrs->assign(keys.size(), kNone);
  old_kinds->assign(keys.size(), 0);
  if (t.index.exact()) {  // the index knows: nothing to read
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint64_t mixed = ssd::MixKey(keys[i]);
      if (t.index.Find(mixed, &(*old_addrs)[i], &(*old_kinds)[i])) continue;
      (*old_addrs)[i] = kNone;
      // Key ranges: a key its range's base may hold counts as a row there
      // (not read: an estimate, see Range::log_delta).
      if (const BaseSegment* b = t.ranged ? t.ranges[t.RangeOf(mixed)].Find(mixed) : nullptr) {
        uint64_t lo = 0, hi = 0;
        b->Candidates(mixed, &lo, &hi);
        if (lo < hi) (*old_kinds)[i] = ssd::kRecordRow;
      }
    }
    return Status::Ok();
  }
  std::vector<uint64_t> addrs;
  std::vector<uint32_t> owner;
  for (size_t i = 0; i < keys.size(); ++i) {
    t.index.AppendCandidates(ssd::MixKey(keys[i]), &addrs);
    owner.resize(addrs.size(), static_cast<uint32_t>(i));
  }
  if (addrs.empty()) return Status::Ok();
  std::vector<const std::byte*> where;
  std::vector<Parsed> parsed;
  STRATA_RETURN_IF_ERROR(ReadRecords(t, addrs, buf, &where, &parsed));
  for (size_t c = 0; c < addrs.size(); ++c) {
    if (parsed[c].key != keys[owner[c]]) continue;
    (*old_addrs)[owner[c]] = addrs[c];
    (*old_kinds)[owner[c]] = parsed[c].kind;
  }
  return Status::Ok();
}

Status Store::MultiPut(TableId table, std::span<const Key> keys, std::span<const std::byte> rows) {
  STRATA_ASSIGN_OR_RETURN(Table * t, Find(table));
  if (rows.size() != keys.size() * t->spec.row_bytes) {
    return Status::InvalidArgument("MultiPut table " + t->spec.name +
                                   ": rows span does not match keys");
  }
  return Write(table, keys, rows.data());
}

Status Store::Delete(TableId table, std::span<const Key> keys) {
  return Write(table, keys, nullptr);
}

Status Store::Write(TableId table, std::span<const Key> keys, const std::byte* rows) {
  STRATA_ASSIGN_OR_RETURN(Table * t, Find(table));
  const uint32_t rb = t->spec.row_bytes;
  // Deduplicate: the last entry of a key wins. Key ranges: sorted by range
  // first, so the records come grouped by their ranges' heads.
  std::vector<uint32_t> order(keys.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  if (t->ranged) {
    std::vector<uint32_t> range(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) range[i] = t->RangeOf(ssd::MixKey(keys[i]));
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return range[a] != range[b] ? range[a] < range[b] : keys[a] < keys[b];
    });
  } else {
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  }
  std::vector<Key> unique;
  std::vector<const std::byte*> unique_rows;
  unique.reserve(keys.size());
  for (size_t j = 0; j < order.size(); ++j) {
    if (j + 1 < order.size() && keys[order[j + 1]] == keys[order[j]]) continue;
    unique.push_back(keys[order[j]]);
    unique_rows.push_back(rows == nullptr ? nullptr : rows + uint64_t{order[j]} * rb);
  }
  if (options_.ssd_background_cleaning) {
    STRATA_RETURN_IF_ERROR(BeforeWrite(*t, unique.size()));
  } else {
    base::MutexLock clean(&clean_mu_);
    STRATA_RETURN_IF_ERROR(Clean(*t, unique.size()));
  }
  base::WriterLock lock(&t->mu);
  STRATA_RETURN_IF_ERROR(Failed());
  std::vector<uint64_t> old_addrs;
  std::vector<uint8_t> old_kinds;
  // Key ranges' puts: every key gets a record whatever the index holds, so
  // the index is resolved while the device writes the records (Resolve
  // reads only DRAM there: the exact index and the bases' directories).
  const bool resolve_meanwhile = t->ranged && rows != nullptr;
  auto resolve = [&]() REQUIRES(t->mu) {
    return Resolve(*t, unique, &old_addrs, &old_kinds, GetScratch());
  };
  if (!resolve_meanwhile) STRATA_RETURN_IF_ERROR(resolve());
  std::vector<NewRecord> recs;
  std::vector<uint32_t> rec_key;  // index into unique
  recs.reserve(unique.size());
  uint64_t seq = t->next_seq;
  for (size_t u = 0; u < unique.size(); ++u) {
    if (rows == nullptr && old_kinds[u] != ssd::kRecordRow) continue;  // nothing to delete
    recs.push_back({unique[u], seq++, rows == nullptr ? ssd::kRecordTombstone : ssd::kRecordRow,
                    unique_rows[u]});
    rec_key.push_back(static_cast<uint32_t>(u));
  }
  if (recs.empty()) return Status::Ok();
  if (seq > ssd::kRecordSeqMax) {
    return Status::ResourceExhausted(t->file->path() + ": table " + t->spec.name +
                                     " ran out of 48-bit write sequence numbers");
  }
  std::vector<uint64_t> addrs;
  // The index and the counts take the records at `addrs`; undone when the
  // records' write fails after the index took them.
  const uint64_t rows_before = t->rows;
  auto apply = [&]() REQUIRES(t->mu) {
    for (size_t r = 0; r < recs.size(); ++r) {
      const size_t u = rec_key[r];
      const uint64_t mixed = ssd::MixKey(unique[u]);
      // A row before: the key's entry, or (key ranges) maybe its base's row.
      const bool was_row = old_kinds[u] == ssd::kRecordRow;
      if (old_addrs[u] != kNone) {
        const bool replaced =
            t->index.Replace(mixed, old_addrs[u], old_kinds[u], addrs[r], recs[r].kind);
        STRATA_ASSERT(replaced, "resolved entry vanished under the writer lock");
        --t->slots[t->SlotOf(old_addrs[u])].live;
        if (!was_row) --t->tombstones;
      } else {
        t->index.Insert(mixed, addrs[r], recs[r].kind);
      }
      ++t->slots[t->SlotOf(addrs[r])].live;
      const bool row = recs[r].kind == ssd::kRecordRow;
      if (!row) ++t->tombstones;
      const int64_t d = int64_t{row} - int64_t{was_row};
      // Clamped: with key ranges the count is an estimate between merges (a
      // put of a new key may count as an overwrite), so a delete could take
      // it below the exact count; it must not wrap.
      t->rows = static_cast<uint64_t>(std::max<int64_t>(static_cast<int64_t>(t->rows) + d, 0));
      if (t->ranged) t->ranges[t->RangeOf(mixed)].log_delta += d;
    }
  };
  auto undo = [&]() REQUIRES(t->mu) {
    for (size_t r = recs.size(); r-- > 0;) {
      const size_t u = rec_key[r];
      const uint64_t mixed = ssd::MixKey(unique[u]);
      const bool was_row = old_kinds[u] == ssd::kRecordRow;
      bool restored = false;
      if (old_addrs[u] != kNone) {
        restored = t->index.Replace(mixed, addrs[r], recs[r].kind, old_addrs[u], old_kinds[u]);
        ++t->slots[t->SlotOf(old_addrs[u])].live;
        if (!was_row) ++t->tombstones;
      } else {
        restored = t->index.Erase(mixed, addrs[r]);
      }
      STRATA_ASSERT(restored, "an entry the failed write added vanished under the writer lock");
      --t->slots[t->SlotOf(addrs[r])].live;
      const bool row = recs[r].kind == ssd::kRecordRow;
      if (!row) --t->tombstones;
      if (t->ranged) t->ranges[t->RangeOf(mixed)].log_delta -= int64_t{row} - int64_t{was_row};
    }
    t->rows = rows_before;
  };
  bool applied = false;
  if (t->ranged) {
    // Each range's records go to its own head: they come grouped by range
    // (the order above). Puts resolve and update the index while the
    // device writes their records.
    std::function<Status()> meanwhile;
    std::function<void()> undo_meanwhile;
    if (resolve_meanwhile) {
      meanwhile = [&]() REQUIRES(t->mu) {
        STRATA_RETURN_IF_ERROR(resolve());
        apply();
        applied = true;
        return Status::Ok();
      };
      undo_meanwhile = [&]() REQUIRES(t->mu) { undo(); };
    }
    STRATA_RETURN_IF_ERROR(AppendRanged(*t, recs, &addrs, meanwhile, undo_meanwhile));
  } else {
    STRATA_RETURN_IF_ERROR(Append(*t, kUserHead, recs, &addrs));
  }
  t->next_seq = seq;
  if (!applied) apply();
  if (rows != nullptr) {
    rows_written_ += keys.size();
    user_bytes_written_ += keys.size() * uint64_t{rb};
  }
  if (options_.ssd_background_cleaning && OverTarget(*t)) WakeCleaner();
  return Status::Ok();
}

Status Store::Scan(TableId table,
                   const std::function<Status(Key, std::span<const std::byte>)>& fn) {
  STRATA_ASSIGN_OR_RETURN(Table * t, Find(table));
  base::ReaderLock lock(&t->mu);
  io::AlignedBuffer buf;
  STRATA_RETURN_IF_ERROR(EnsureBytes(&buf, t->segment_bytes));
  auto* data = reinterpret_cast<std::byte*>(buf.data());
  std::vector<uint32_t> pages;
  for (uint64_t s = 0; s < t->slots.size(); ++s) {
    const Slot& slot = t->slots[s];
    if ((slot.state != kCurrent && slot.state != kBoth) || slot.live == 0) continue;
    const Head* head = nullptr;
    for (const Head& h : t->heads) {
      if (h.slot == static_cast<int64_t>(s)) head = &h;
    }
    const uint64_t end = t->End(s);
    const uint64_t on_disk = head != nullptr ? head->written : RoundUp(end);
    pages.clear();
    for (uint64_t b = 0; b < on_disk / kBlock; ++b) {
      pages.push_back(static_cast<uint32_t>(s * t->slot_blocks + b));
    }
    STRATA_RETURN_IF_ERROR(t->file->ReadPages(pages, data));
    bytes_read_ += on_disk;
    if (head != nullptr)
      std::memcpy(data + head->pend_off, head->pend.data(), end - head->pend_off);
    for (uint64_t i = 0; i < slot.records; ++i) {
      const std::byte* rec = data + t->RecordOffset(i);
      const uint64_t addr = t->Address(s, i);
      const uint64_t mixed = ssd::MixKey(ParseRecord(rec).key);
      if (slot.role == kRoleBase) {
        // A base row is live unless the log holds its key (newer).
        uint64_t at = 0;
        uint8_t kind = 0;
        if (t->index.Find(mixed, &at, &kind)) continue;
      } else if (!t->index.Contains(mixed, addr)) {
        continue;
      }
      Parsed p;
      STRATA_RETURN_IF_ERROR(VerifyRecord(rec, *t, slot.segment_seq, i, t->file->path(),
                                          s * t->segment_bytes + t->RecordOffset(i), &p));
      if (p.kind != ssd::kRecordRow) continue;
      STRATA_RETURN_IF_ERROR(fn(p.key, {rec + ssd::kRecordHeaderBytes, t->spec.row_bytes}));
    }
  }
  return Status::Ok();
}

Status Store::Sync() {
  STRATA_RETURN_IF_ERROR(Failed());
  for (auto& t : tables_) {
    base::ReaderLock lock(&t->mu);
    if (Status s = t->file->Sync(); !s.ok()) {
      Fail(s);
      return Failed();
    }
  }
  return Status::Ok();
}

Status Store::FlushHead(Table& t, Head& h) {
  if (h.slot < 0) return Status::Ok();
  const uint64_t slot = static_cast<uint64_t>(h.slot);
  if (t.slots[slot].records == 0) {  // nothing appended: give the slot back
    t.SetState(slot, kFree);
    h.slot = -1;
    return Status::Ok();
  }
  const uint64_t end = t.End(slot);
  if (RoundUp(end) > h.written) {
    std::vector<uint32_t> pages;
    for (uint64_t b = h.written / kBlock; b < RoundUp(end) / kBlock; ++b) {
      pages.push_back(static_cast<uint32_t>(slot * t.slot_blocks + b));
    }
    STRATA_RETURN_IF_ERROR(t.file->WritePages(
        pages, reinterpret_cast<const std::byte*>(h.pend.data()) + (h.written - h.pend_off)));
    bytes_written_ += RoundUp(end) - h.written;
  }
  t.slots[slot].sealed = true;
  h.slot = -1;
  return Status::Ok();
}

Status Store::FlushHeads(Table& t) {
  for (Head& h : t.heads) STRATA_RETURN_IF_ERROR(FlushHead(t, h));
  return Status::Ok();
}

void Store::AfterManifestSwitch(Table& t) {
  uint64_t keep = 0;
  for (uint64_t s = 0; s < t.slots.size(); ++s) {
    if (t.slots[s].state == kCheckpointOnly) t.SetState(s, kFree);
    // A running merge's output is in no MANIFEST yet: it stays current only.
    if (t.slots[s].state == kCurrent && t.slots[s].role != kRoleMergeOutput) t.SetState(s, kBoth);
    if (t.slots[s].state != kFree) keep = s + 1;
  }
  t.slots.resize(keep);
  t.free_hint = std::min<uint64_t>(t.free_hint, keep);
  (void)NoteCleanup(t.file->TruncatePages(keep * t.slot_blocks));
}

Status Store::Checkpoint(std::span<const std::byte> meta) {
  if (meta.size() > kCheckpointMetaBytesMax) {
    return Status::InvalidArgument("Checkpoint: meta larger than kCheckpointMetaBytesMax");
  }
  base::MutexLock checkpoint_lock(&checkpoint_mu_);
  // Pause the cleaner: it starts no step until the switch is done. When a
  // table is cleaned (not of key ranges), also wait for its running step
  // (a cleaning step's slots, heads and copies are then whole). A merge
  // goes on beside the checkpoint, taking a table lock only to allocate and
  // to switch: its output slots are left out of the MANIFEST, and its
  // inputs stay current until its switch (docs/ssd-format.md, "Merges and
  // checkpoints").
  {
    base::MutexLock lock(&cleaner_mu_);
    ++pauses_;
  }
  // Holds clean_mu_ for the scope when asked (not annotated: held or not
  // by a condition constant after open; nothing below reads what clean_mu_
  // guards).
  struct Quiesce {
    base::Mutex* mu;
    explicit Quiesce(base::Mutex* m) NO_THREAD_SAFETY_ANALYSIS : mu(m) {
      if (mu != nullptr) mu->Lock();
    }
    ~Quiesce() NO_THREAD_SAFETY_ANALYSIS {
      if (mu != nullptr) mu->Unlock();
    }
    Quiesce(const Quiesce&) = delete;
    Quiesce& operator=(const Quiesce&) = delete;
  } quiesce(checkpoint_quiesces_ ? &clean_mu_ : nullptr);
  struct Resume {
    Store* store;
    ~Resume() {
      base::MutexLock lock(&store->cleaner_mu_);
      --store->pauses_;
      store->cleaner_cv_.Signal();
    }
  } resume{this};
  std::vector<std::unique_lock<base::RwLock>> locks;
  for (auto& t : tables_) locks.emplace_back(t->mu);
  // A failed cleaning step or merge does not stop the checkpoint: it freed
  // what it wrote and changed nothing current (docs/ssd-format.md, "Merge
  // and cleaning errors").
  STRATA_RETURN_IF_ERROR(Failed());
  ManifestV2 m;
  m.generation = generation_ + 1;
  m.meta.assign(meta.begin(), meta.end());
  for (auto& t : tables_) {
    t->mu.AssertHeld();  // through `locks`
    STRATA_RETURN_IF_ERROR(FlushHeads(*t));
    if (Status s = t->file->Sync(); !s.ok()) {
      Fail(s);
      return Failed();
    }
    ManifestTableV2 mt;
    mt.spec = t->spec;
    mt.segment_bytes = static_cast<uint32_t>(t->segment_bytes);
    mt.file_number = t->file_number;
    mt.row_count = t->rows;
    mt.next_seq = t->next_seq;
    mt.next_segment_seq = t->next_segment_seq;
    m.ranges = m.ranges || t->ranged;
    for (uint64_t s = 0; s < t->slots.size(); ++s) {
      const Slot& slot = t->slots[s];
      if (slot.state != kCurrent && slot.state != kBoth) continue;
      if (slot.role == kRoleMergeOutput) continue;  // a running merge's, not switched in
      mt.segments.push_back({static_cast<uint32_t>(s), slot.records, slot.segment_seq});
    }
    m.tables.push_back(std::move(mt));
  }
  uint64_t bytes = 0;
  bool in_doubt = false;
  if (Status s = WriteManifestV2(env_, options_.dir, m, &bytes, &in_doubt); !s.ok()) {
    if (!in_doubt) return s;
    // Either MANIFEST may be the durable one: keep what both name.
    generation_ = m.generation;
    for (auto& t : tables_) {
      t->mu.AssertHeld();  // through `locks`
      for (uint64_t slot = 0; slot < t->slots.size(); ++slot) {
        if (t->slots[slot].state == kCurrent && t->slots[slot].role != kRoleMergeOutput) {
          t->SetState(slot, kBoth);
        }
      }
    }
    return s.WithContext("checkpoint " + std::to_string(m.generation) + " of " + options_.dir +
                         " in doubt (segments of both MANIFESTs are kept until a checkpoint "
                         "succeeds)");
  }
  bytes_written_ += bytes;
  generation_ = m.generation;
  {
    base::MutexLock meta_lock(&meta_mu_);
    meta_ = std::move(m.meta);
  }
  for (auto& t : tables_) {
    t->mu.AssertHeld();  // through `locks`
    AfterManifestSwitch(*t);
  }
  return Status::Ok();
}

RowStoreStats Store::Stats() const {
  RowStoreStats s;
  s.rows_read = rows_read_.load();
  s.rows_written = rows_written_.load();
  s.bytes_read = bytes_read_.load();
  s.bytes_written = bytes_written_.load();
  s.user_bytes_written = user_bytes_written_.load();
  s.cleanup_errors = cleanup_errors_.load();
  s.merges = merges_.load();
  s.merge_failures = merge_failures_.load();
  for (const auto& t : tables_) {
    base::ReaderLock lock(&t->mu);
    s.live_rows += t->rows;
    s.live_bytes += t->rows * t->spec.row_bytes;
    s.file_bytes += t->used_slots * t->segment_bytes;
    s.index_bytes += t->index.MemoryBytes() + t->slots.capacity() * sizeof(Slot);
    // Key ranges: the bases' directories and the heads' DRAM.
    for (const Range& rg : t->ranges) {
      for (const BaseSegment& b : rg.base) s.index_bytes += b.MemoryBytes();
      s.index_bytes += sizeof(Range) + rg.staging.size();
    }
    if (t->ranged) {
      for (const Head& h : t->heads) s.index_bytes += h.pend.size();
    }
  }
  return s;
}

}  // namespace logstore

Result<std::unique_ptr<RowStore>> OpenLogRowStore(const RowStoreOptions& options,
                                                  const std::vector<TableSpec>& tables) {
  io::Env* env = options.env != nullptr ? options.env : io::Env::Default();
  auto store = std::make_unique<logstore::Store>(options, env);
  STRATA_RETURN_IF_ERROR(store->Open(tables));
  store->StartCleaner();
  return std::unique_ptr<RowStore>(std::move(store));
}

}  // namespace strata::storage
