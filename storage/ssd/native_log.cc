// Native store write log (docs/ssd-format.md, "Write log"): MultiPut and
// Delete append to a per-table log instead of rewriting leaves. Rows are
// encoded as checksummed records into one aligned buffer and written with
// large sequential O_DIRECT requests through io::IoThreads, starting at a
// fresh unit so no unit an earlier call wrote is ever rewritten; the DRAM
// LogIndex switches to them only once the write succeeded, so a failed call
// changes nothing. Deletes are tombstones in the index only.
//
// When a cycle's entries reach the budget (write_log_fraction of the table's
// rows), and before every checkpoint, MergeLog folds the log into the leaves
// in mixed-key order through the copy-on-write rounds of native_write.cc:
// each leaf absorbs all of its log rows in one rewrite. No MANIFEST names the
// log, so a checkpoint holds only leaves and Open truncates the log.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "storage/ssd/limits.h"
#include "storage/ssd/native_table.h"

namespace strata::storage::native {
namespace {

// Log rows a merge reads and applies per step, and the row bytes of a step
// (bound its buffers: 4 MiB of rows, and at most a unit per row).
constexpr size_t kMergeRowsPerStepMax = 8192;
constexpr size_t kMergeRowBytesPerStepMax = 4u << 20;
// Bytes of units one log read round fetches at most (at least one unit).
constexpr size_t kLogReadBytesPerRoundMax = 8u << 20;

}  // namespace

void Store::StartLogCycle(Table& t) {
  const double wanted = std::max(double(options_.write_log_entries_min),
                                 options_.write_log_fraction * double(t.row_count));
  // No log (fraction 0): an empty index, never written.
  const uint64_t entries =
      options_.write_log_fraction > 0
          ? static_cast<uint64_t>(std::min(wanted, double(LogIndex::kRecordsMax)))
          : 0;
  // Resize only when the budget moved by a quarter: a steady table keeps its
  // array, and the index stays within kSlotsPerEntry x 12 bytes of the budget.
  const uint64_t have = t.log_index.entries_max();
  if (entries == 0 || have == 0 || entries > have || 4 * entries < 3 * have) {
    t.log_index.Reset(entries);
  } else {
    t.log_index.Clear();
  }
  t.log_records = 0;
  t.log_entries = 0;
  t.log_rows = 0;
  ++t.log_epoch;
}

Status Store::OpenLog(Table& t) {
  t.log_layout = ssd::MakeLogLayout(t.spec.row_bytes);
  STRATA_ASSIGN_OR_RETURN(
      t.log, PageFile::Open(env_, options_.dir + "/" + ssd::LogFileName(t.spec.id),
                            t.log_layout.unit_bytes, /*create=*/true, options_.direct_io,
                            io_threads_.get()));
  t.log_units = 0;
  StartLogCycle(t);
  return Status::Ok();
}

Status Store::AppendToLog(Table& t, std::span<const Key> keys, const std::byte* rows) {
  const uint64_t n = keys.size();
  if (n == 0) return Status::Ok();
  const ssd::LogLayout& l = t.log_layout;
  auto first_record = [&]() REQUIRES(t.mu) {
    return (t.log_records + l.records_per_unit - 1) / l.records_per_unit * l.records_per_unit;
  };
  const uint64_t records = rows != nullptr ? n : 0;
  if (t.log_entries + n > t.log_index.entries_max() ||
      first_record() + records > LogIndex::kRecordsMax) {
    STRATA_RETURN_IF_ERROR(MergeLog(t));
    // A batch larger than a whole cycle goes straight to the leaves.
    if (n > t.log_index.entries_max()) return ApplyToLeaves(t, keys, rows, /*user=*/true);
  }
  if (rows == nullptr) {
    for (Key key : keys) {
      const uint32_t previous = t.log_index.Insert(key, LogIndex::kTombstone);
      if (previous != LogIndex::kAbsent && previous != LogIndex::kTombstone) --t.log_rows;
    }
    t.log_entries += n;
    return Status::Ok();
  }
  const uint64_t first = first_record();
  const uint64_t first_unit = first / l.records_per_unit;
  const uint64_t units = (n + l.records_per_unit - 1) / l.records_per_unit;
  io::AlignedBuffer& out = *ThreadScratch(kWriteOutScratch);
  STRATA_RETURN_IF_ERROR(EnsureBytes(&out, units * l.unit_bytes));
  auto* data = reinterpret_cast<std::byte*>(out.data());
  std::memset(data, 0, units * l.unit_bytes);
  const uint32_t rb = t.spec.row_bytes;
  for (uint64_t i = 0; i < n; ++i) {
    std::byte* dst =
        data + (i / l.records_per_unit) * l.unit_bytes + (i % l.records_per_unit) * l.record_bytes;
    SealLogRecord(dst, t.spec.id, LogSeed(t.spec.id, t.log_epoch, first + i), keys[i],
                  rows + i * rb, rb);
  }
  std::vector<uint32_t> pages(units);
  for (uint64_t u = 0; u < units; ++u) pages[u] = static_cast<uint32_t>(first_unit + u);
  STRATA_RETURN_IF_ERROR(t.log->WritePages(pages, data));
  // Written: switch the index (a later entry of a key in the batch wins).
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t previous = t.log_index.Insert(keys[i], static_cast<uint32_t>(first + i));
    if (previous == LogIndex::kAbsent || previous == LogIndex::kTombstone) ++t.log_rows;
  }
  t.log_records = first + n;
  t.log_entries += n;
  t.log_units = std::max(t.log_units, first_unit + units);
  bytes_written_ += units * l.unit_bytes;
  user_bytes_written_ += n * rb;
  rows_written_ += n;
  return Status::Ok();
}

Status Store::ReadFromLog(Table& t, std::span<const Key> keys, std::span<LogWant> wants,
                          std::byte* rows, uint8_t* found) {
  const ssd::LogLayout& l = t.log_layout;
  const uint32_t rb = t.spec.row_bytes;
  std::sort(wants.begin(), wants.end(),
            [](const LogWant& a, const LogWant& b) { return a.record < b.record; });
  io::AlignedBuffer& buf = *ThreadScratch(kGetScratch);
  std::vector<uint32_t> units;
  size_t pos = 0;
  while (pos < wants.size()) {
    units.clear();
    size_t end = pos;
    while (end < wants.size()) {
      const uint32_t unit = wants[end].record / l.records_per_unit;
      if (units.empty() || units.back() != unit) {
        if (!units.empty() && (units.size() + 1) * l.unit_bytes > kLogReadBytesPerRoundMax) break;
        units.push_back(unit);
      }
      ++end;
    }
    STRATA_RETURN_IF_ERROR(EnsureBytes(&buf, units.size() * l.unit_bytes));
    auto* data = reinterpret_cast<std::byte*>(buf.data());
    STRATA_RETURN_IF_ERROR(t.log->ReadPages(units, data));
    bytes_read_ += units.size() * uint64_t{l.unit_bytes};
    size_t u = 0;
    for (size_t w = pos; w < end; ++w) {
      const uint32_t unit = wants[w].record / l.records_per_unit;
      while (units[u] != unit) ++u;
      const uint64_t in_unit = uint64_t{wants[w].record % l.records_per_unit} * l.record_bytes;
      const std::byte* src = data + u * l.unit_bytes + in_unit;
      const Key key = keys[wants[w].index];
      STRATA_RETURN_IF_ERROR(VerifyLogRecord(src, t.spec.id,
                                             LogSeed(t.spec.id, t.log_epoch, wants[w].record), key,
                                             rb, t.log->path(), t.log->Offset(unit) + in_unit));
      std::memcpy(rows + uint64_t{wants[w].index} * rb, src + ssd::kLogRecordHeaderBytes, rb);
      found[wants[w].index] = 1;
    }
    pos = end;
  }
  return Status::Ok();
}

Status Store::MergeLog(Table& t) {
  if (t.log_entries == 0) return Status::Ok();
  std::vector<LogIndex::Entry> entries = t.log_index.Entries();
  std::vector<uint64_t> mixed(entries.size());
  std::vector<uint32_t> order(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    mixed[i] = ssd::MixKey(entries[i].key);
    order[i] = static_cast<uint32_t>(i);
  }
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return mixed[a] < mixed[b]; });
  const uint32_t rb = t.spec.row_bytes;
  const size_t step = std::clamp<size_t>(kMergeRowBytesPerStepMax / rb, 1, kMergeRowsPerStepMax);
  std::vector<Key> put_keys, delete_keys;
  std::vector<std::byte> put_rows(step * rb);
  std::vector<LogWant> wants;
  std::vector<uint8_t> found(step);
  for (size_t pos = 0; pos < order.size(); pos += step) {
    const size_t end = std::min(order.size(), pos + step);
    put_keys.clear();
    delete_keys.clear();
    wants.clear();
    for (size_t i = pos; i < end; ++i) {
      const LogIndex::Entry& e = entries[order[i]];
      if (e.value == LogIndex::kTombstone) {
        delete_keys.push_back(e.key);
      } else {
        wants.push_back({e.value, static_cast<uint32_t>(put_keys.size())});
        put_keys.push_back(e.key);
      }
    }
    if (!wants.empty()) {
      STRATA_RETURN_IF_ERROR(ReadFromLog(t, put_keys, wants, put_rows.data(), found.data()));
      STRATA_RETURN_IF_ERROR(ApplyToLeaves(t, put_keys, put_rows.data(), /*user=*/false));
    }
    if (!delete_keys.empty()) {
      STRATA_RETURN_IF_ERROR(ApplyToLeaves(t, delete_keys, nullptr, /*user=*/false));
    }
  }
  StartLogCycle(t);
  return Status::Ok();
}

}  // namespace strata::storage::native
