// Native store writes: a batch is sorted by mixed key, grouped by leaf, and
// applied in rounds of at most kLeavesPerRoundMax leaves. A round reads the
// touched leaves, merges, splits leaves that overflow, writes every new leaf
// to free pages in one batch, and only then switches the directory, so a
// failed round changes nothing (an earlier round of the batch stays applied).
#include <algorithm>
#include <cstring>

#include "storage/ssd/limits.h"
#include "storage/ssd/native_table.h"

namespace strata::storage::native {
namespace {

// Ops of one round at most: bounds the pages a round writes.
constexpr size_t kOpsPerRoundMax = 1 << 16;

}  // namespace

Status Store::MultiPut(TableId table, std::span<const Key> keys, std::span<const std::byte> rows) {
  STRATA_ASSIGN_OR_RETURN(Table * t, Find(table));
  if (rows.size() != keys.size() * t->spec.row_bytes) {
    return Status::InvalidArgument("MultiPut table " + t->spec.name +
                                   ": rows span is not keys.size() * row_bytes");
  }
  return ApplyWrites(*t, keys, rows.data());
}

Status Store::Delete(TableId table, std::span<const Key> keys) {
  STRATA_ASSIGN_OR_RETURN(Table * t, Find(table));
  return ApplyWrites(*t, keys, nullptr);
}

Status Store::ApplyWrites(Table& t, std::span<const Key> keys, const std::byte* rows) {
  if (options_.write_log_fraction <= 0) {
    base::WriterLock lock(&t.mu);
    return ApplyToLeaves(t, keys, rows, /*user=*/true);
  }
  for (;;) {
    Append result;
    uint64_t progress = 0;
    bool queued = false;
    {
      base::WriterLock lock(&t.mu);
      STRATA_ASSIGN_OR_RETURN(result, AppendToLog(t, keys, rows, &progress, &queued));
    }
    if (result == Append::kDone) return Status::Ok();
    if (result == Append::kWait) {
      // Backpressure: the log index is full until the merge frees room.
      // Wait for the merge thread's next round, or run the merge here when
      // the thread does not have it in hand (it failed, or a checkpoint froze
      // the log).
      Hook(LogMergePoint::kBackpressure);
      if (queued) {
        t.WaitProgress(progress);
      } else {
        MergeLock merge(&t);
        STRATA_RETURN_IF_ERROR(MergeFrozen(t));
      }
      continue;
    }
    // Larger than the whole log index: straight to the leaves, once
    // everything put before it is there (a log entry would hide the newer
    // leaf row).
    MergeLock merge(&t);
    STRATA_RETURN_IF_ERROR(DrainLogs(t));
    base::WriterLock lock(&t.mu);
    return ApplyToLeaves(t, keys, rows, /*user=*/true);
  }
}

Status Store::ApplyToLeaves(Table& t, std::span<const Key> keys, const std::byte* rows, bool user) {
  std::vector<Op> ops(keys.size());
  const uint32_t rb = t.spec.row_bytes;
  for (size_t i = 0; i < keys.size(); ++i) {
    ops[i] = {ssd::MixKey(keys[i]), keys[i], rows != nullptr ? rows + i * rb : nullptr, 0};
  }
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Op& a, const Op& b) { return a.mixed < b.mixed; });
  size_t kept = 0;  // the last op of a key wins
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i + 1 < ops.size() && ops[i + 1].mixed == ops[i].mixed) continue;
    ops[kept++] = ops[i];
  }
  ops.resize(kept);
  std::vector<Group> groups;
  size_t pos = 0;
  while (pos < ops.size()) {
    const size_t end = GroupRound(t, ops, pos, &groups, kLeavesPerRoundMax);
    STRATA_RETURN_IF_ERROR(WriteRound(t, std::span<const Op>(ops), groups, user));
    pos = end;
  }
  return Status::Ok();
}

size_t Store::GroupRound(Table& t, std::span<const Op> ops, size_t pos, std::vector<Group>* groups,
                         uint32_t leaves_max) {
  groups->clear();
  const size_t round_end = std::min(ops.size(), pos + kOpsPerRoundMax);
  while (pos < round_end && groups->size() < leaves_max) {
    const PageDirectory::Handle h = t.dir.Find(ops[pos].mixed);
    uint64_t next_low = 0;
    const bool has_next = t.dir.NextLow(h, &next_low);
    size_t end = pos;
    while (end < round_end && (!has_next || ops[end].mixed < next_low)) ++end;
    const ssd::LeafRecord& leaf = t.dir.at(h);
    groups->push_back({leaf.low_mixed, leaf.page, leaf.row_count, pos, end});
    pos = end;
  }
  return pos;
}

size_t Store::RoundPagesMax(const Table& t, std::span<const Op> ops,
                            std::span<const Group> groups) {
  size_t pages = 0;
  for (const Group& g : groups) {
    uint64_t rows = g.old_rows;
    for (size_t o = g.begin; o < g.end; ++o) rows += ops[o].row != nullptr ? 1 : 0;
    pages += (rows + t.capacity - 1) / t.capacity;
  }
  return pages;
}

Status Store::WriteRound(Table& t, std::span<const Op> ops, std::span<const Group> groups,
                         bool user) {
  Round r;
  STRATA_RETURN_IF_ERROR(PlanRound(t, t.file.get(), ops, groups, &r));
  STRATA_ASSIGN_OR_RETURN(r.pages, t.Allocate(r.new_pages));
  if (Status s = WriteRoundPages(t, t.file.get(), groups, &r); !s.ok()) {
    t.Unallocate(r.pages);
    return s;
  }
  SwitchRound(t, groups, r, user);
  return Status::Ok();
}

Status Store::PlanRound(Table& t, PageFile* file, std::span<const Op> ops,
                        std::span<const Group> groups, Round* r) {
  std::vector<uint32_t> read_pages;
  std::vector<uint64_t> read_lows;
  for (const Group& g : groups) {
    if (g.old_page == ssd::kNoPage) continue;
    read_pages.push_back(g.old_page);
    read_lows.push_back(g.low);
  }
  io::AlignedBuffer& in = *ThreadScratch(kWriteInScratch);
  if (!read_pages.empty()) {
    STRATA_RETURN_IF_ERROR(ReadVerifiedFrom(t, file, read_pages, read_lows, &in));
  }

  // Merge each leaf's rows with its ops (both sorted by mixed key).
  *r = Round{};
  r->merged_begin.resize(groups.size() + 1);
  r->changed.assign(groups.size(), 0);
  size_t page_index = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    r->merged_begin[g] = r->merged.size();
    const std::byte* page = nullptr;
    uint32_t count = 0;
    if (groups[g].old_page != ssd::kNoPage) {
      page = reinterpret_cast<std::byte*>(in.data()) + page_index++ * t.page_bytes;
      count = t.CountOf(page);
    }
    uint32_t s = 0;
    size_t o = groups[g].begin;
    while (s < count || o < groups[g].end) {
      const uint64_t sm = s < count ? ssd::MixKey(t.KeyAt(page, s)) : 0;
      const bool take_slot = o == groups[g].end || (s < count && sm < ops[o].mixed);
      if (take_slot) {
        r->merged.push_back({sm, t.KeyAt(page, s), t.RowAt(page, s)});
        ++s;
        continue;
      }
      const bool replaces = s < count && sm == ops[o].mixed;
      const Op& op = ops[o++];
      if (replaces) ++s;
      if (op.row != nullptr) {
        r->merged.push_back({op.mixed, op.key, op.row});
        r->row_delta += replaces ? 0 : 1;
        ++r->put_rows;
        r->changed[g] = 1;
      } else if (replaces) {
        r->row_delta -= 1;
        r->changed[g] = 1;
      }
    }
  }
  r->merged_begin[groups.size()] = r->merged.size();

  // Lay out the new leaves: ceil(n / capacity) pages, rows spread evenly.
  r->pieces.assign(groups.size(), 0);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!r->changed[g]) continue;
    const size_t n = r->merged_begin[g + 1] - r->merged_begin[g];
    r->pieces[g] = static_cast<uint32_t>((n + t.capacity - 1) / t.capacity);
    r->new_pages += r->pieces[g];
  }
  return Status::Ok();
}

Status Store::WriteRoundPages(Table& t, PageFile* file, std::span<const Group> groups, Round* r) {
  const uint32_t rb = t.spec.row_bytes;
  io::AlignedBuffer& out = *ThreadScratch(kWriteOutScratch);
  STRATA_RETURN_IF_ERROR(EnsureBytes(&out, std::max<size_t>(1, r->new_pages) * t.page_bytes));
  auto* out_data = reinterpret_cast<std::byte*>(out.data());
  r->leaves.assign(groups.size(), {});
  size_t next_page = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!r->changed[g]) continue;
    const size_t first = r->merged_begin[g], n = r->merged_begin[g + 1] - first;
    const uint32_t pieces = r->pieces[g];
    if (pieces == 0) r->leaves[g].push_back({groups[g].low, ssd::kNoPage, 0});
    for (uint32_t p = 0; p < pieces; ++p) {
      const size_t lo = first + n * p / pieces, hi = first + n * (p + 1) / pieces;
      std::byte* page = out_data + next_page * t.page_bytes;
      std::memset(page, 0, t.page_bytes);
      for (size_t i = lo; i < hi; ++i) {
        std::memcpy(page + ssd::kPageHeaderBytes + (i - lo) * 8, &r->merged[i].key, 8);
        std::memcpy(const_cast<std::byte*>(t.RowAt(page, uint32_t(i - lo))), r->merged[i].row, rb);
      }
      const uint64_t low = p == 0 ? groups[g].low : r->merged[lo].mixed;
      SealPage(page, t.page_bytes, t.spec.id, uint16_t(hi - lo), low);
      r->leaves[g].push_back({low, r->pages[next_page], uint32_t(hi - lo)});
      ++next_page;
    }
  }
  return file->WritePages(r->pages, out_data);
}

void Store::SwitchRound(Table& t, std::span<const Group> groups, const Round& r, bool user,
                        std::span<const Op> merged_ops) {
  // Durable-independent switch: the directory now points at the new pages.
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!r.changed[g]) continue;
    t.dir.Replace(t.dir.Find(groups[g].low), r.leaves[g]);
    if (groups[g].old_page != ssd::kNoPage) t.Release(groups[g].old_page);
  }
  t.row_count = uint64_t(int64_t(t.row_count) + r.row_delta);
  // The leaves now hold the merged entries: the log index forgets those no
  // put has replaced since (a newer entry stays, and keeps hiding the leaf).
  for (const Op& op : merged_ops) {
    if (t.log_index.Erase(op.key, op.log_value) && RecordOf(op.log_value) != LogIndex::kTombstone) {
      --t.logs[LogOf(op.log_value)].rows;
    }
  }
  bytes_written_ += r.new_pages * uint64_t{t.page_bytes};
  if (user) {
    user_bytes_written_ += r.put_rows * t.spec.row_bytes;
    rows_written_ += r.put_rows;
  }
}

}  // namespace strata::storage::native
