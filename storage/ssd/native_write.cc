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

struct Slot {
  uint64_t mixed;
  Key key;
  const std::byte* row;
};

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
  base::WriterLock lock(&t.mu);
  if (options_.write_log_fraction > 0) return AppendToLog(t, keys, rows);
  return ApplyToLeaves(t, keys, rows, /*user=*/true);
}

Status Store::ApplyToLeaves(Table& t, std::span<const Key> keys, const std::byte* rows, bool user) {
  std::vector<Op> ops(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) ops[i] = {ssd::MixKey(keys[i]), uint32_t(i)};
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
    groups.clear();
    const size_t round_end = std::min(ops.size(), pos + kOpsPerRoundMax);
    while (pos < round_end && groups.size() < kLeavesPerRoundMax) {
      const PageDirectory::Handle h = t.dir.Find(ops[pos].mixed);
      uint64_t next_low = 0;
      const bool has_next = t.dir.NextLow(h, &next_low);
      size_t end = pos;
      while (end < round_end && (!has_next || ops[end].mixed < next_low)) ++end;
      groups.push_back({t.dir.at(h).low_mixed, t.dir.at(h).page, pos, end});
      pos = end;
    }
    STRATA_RETURN_IF_ERROR(WriteRound(t, keys, rows, ops, groups, user));
  }
  return Status::Ok();
}

Status Store::WriteRound(Table& t, std::span<const Key> keys, const std::byte* rows,
                         std::span<const Op> ops, std::span<const Group> groups, bool user) {
  const uint32_t rb = t.spec.row_bytes;
  std::vector<uint32_t> read_pages;
  std::vector<uint64_t> read_lows;
  for (const Group& g : groups) {
    if (g.old_page == ssd::kNoPage) continue;
    read_pages.push_back(g.old_page);
    read_lows.push_back(g.low);
  }
  io::AlignedBuffer& in = *ThreadScratch(kWriteInScratch);
  if (!read_pages.empty()) STRATA_RETURN_IF_ERROR(ReadVerified(t, read_pages, read_lows, &in));

  // Merge each leaf's rows with its ops (both sorted by mixed key).
  std::vector<Slot> merged;
  std::vector<size_t> merged_begin(groups.size() + 1);
  std::vector<uint8_t> changed(groups.size(), 0);
  int64_t row_delta = 0;
  size_t page_index = 0;
  uint64_t user_bytes = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    merged_begin[g] = merged.size();
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
        merged.push_back({sm, t.KeyAt(page, s), t.RowAt(page, s)});
        ++s;
        continue;
      }
      const bool replaces = s < count && sm == ops[o].mixed;
      const Op& op = ops[o++];
      if (replaces) ++s;
      if (rows != nullptr) {
        merged.push_back({op.mixed, keys[op.index], rows + uint64_t{op.index} * rb});
        row_delta += replaces ? 0 : 1;
        user_bytes += rb;
        changed[g] = 1;
      } else if (replaces) {
        row_delta -= 1;
        changed[g] = 1;
      }
    }
  }
  merged_begin[groups.size()] = merged.size();

  // Lay out the new leaves: ceil(n / capacity) pages, rows spread evenly.
  std::vector<uint32_t> pieces(groups.size(), 0);
  size_t new_pages = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!changed[g]) continue;
    const size_t n = merged_begin[g + 1] - merged_begin[g];
    pieces[g] = static_cast<uint32_t>((n + t.capacity - 1) / t.capacity);
    new_pages += pieces[g];
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<uint32_t> pages, t.Allocate(new_pages));
  io::AlignedBuffer& out = *ThreadScratch(kWriteOutScratch);
  if (Status s = EnsureBytes(&out, std::max<size_t>(1, new_pages) * t.page_bytes); !s.ok()) {
    t.Unallocate(pages);
    return s;
  }
  auto* out_data = reinterpret_cast<std::byte*>(out.data());
  std::vector<std::vector<ssd::LeafRecord>> leaves(groups.size());
  size_t next_page = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!changed[g]) continue;
    const size_t first = merged_begin[g], n = merged_begin[g + 1] - first;
    if (pieces[g] == 0) leaves[g].push_back({groups[g].low, ssd::kNoPage, 0});
    for (uint32_t p = 0; p < pieces[g]; ++p) {
      const size_t lo = first + n * p / pieces[g], hi = first + n * (p + 1) / pieces[g];
      std::byte* page = out_data + next_page * t.page_bytes;
      std::memset(page, 0, t.page_bytes);
      for (size_t r = lo; r < hi; ++r) {
        std::memcpy(page + ssd::kPageHeaderBytes + (r - lo) * 8, &merged[r].key, 8);
        std::memcpy(const_cast<std::byte*>(t.RowAt(page, uint32_t(r - lo))), merged[r].row, rb);
      }
      const uint64_t low = p == 0 ? groups[g].low : merged[lo].mixed;
      SealPage(page, t.page_bytes, t.spec.id, uint16_t(hi - lo), low);
      leaves[g].push_back({low, pages[next_page], uint32_t(hi - lo)});
      ++next_page;
    }
  }
  if (Status s = t.file->WritePages(pages, out_data); !s.ok()) {
    t.Unallocate(pages);
    return s;
  }
  // Durable-independent switch: the directory now points at the new pages.
  for (size_t g = 0; g < groups.size(); ++g) {
    if (!changed[g]) continue;
    t.dir.Replace(t.dir.Find(groups[g].low), leaves[g]);
    if (groups[g].old_page != ssd::kNoPage) t.Release(groups[g].old_page);
  }
  t.row_count = uint64_t(int64_t(t.row_count) + row_delta);
  bytes_written_ += new_pages * uint64_t{t.page_bytes};
  if (user) {
    user_bytes_written_ += user_bytes;
    if (rows != nullptr) rows_written_ += user_bytes / rb;
  }
  return Status::Ok();
}

}  // namespace strata::storage::native
