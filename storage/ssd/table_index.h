// TableIndex: the DRAM index of one table of the native store's format 2
// (docs/ssd-format.md, "DRAM index" and "Exact index"), either a CompactIndex
// (entries hold 22 bits of the mixed key: a lookup yields candidate records
// the caller reads to find the key's own) or an ExactIndex (entries hold the
// whole mixed key and the record's kind: a lookup answers without a read).
// Callers speak of record addresses and kinds; the ExactIndex payload is
// address << 1 | tombstone.
//
// Thread safety: none; the table's lock guards it (shared for lookups).
// Ownership: owns the index.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/assert.h"
#include "storage/ssd/compact_index.h"
#include "storage/ssd/ssd_format.h"
#include "strata/options.h"

namespace strata::storage {

class TableIndex {
 public:
  static constexpr uint64_t kAddressMax = CompactIndex::kPayloadMax;
  static_assert(ExactIndex::kPayloadMax == 2 * kAddressMax + 1, "address and tombstone bit");

  // kRanges uses the exact index (over the log's rows only).
  explicit TableIndex(SsdIndex kind) { Reset(kind); }

  // Empties the index and makes it of `kind`.
  void Reset(SsdIndex kind) {
    exact_ = kind != SsdIndex::kCompact;
    compact_.reset();
    exact_index_.reset();
    if (exact_) {
      exact_index_.emplace();
    } else {
      compact_.emplace();
    }
  }

  // True for an ExactIndex: use Find, not AppendCandidates.
  bool exact() const { return exact_; }

  // Compact: appends the addresses of `mixed`'s candidates to `out`.
  void AppendCandidates(uint64_t mixed, std::vector<uint64_t>* out) const {
    STRATA_ASSERT(!exact_, "AppendCandidates on an exact index");
    constexpr size_t kInline = 8;  // candidates looked at without allocating
    uint64_t inline_cand[kInline];
    size_t n = compact_->Candidates(mixed, inline_cand);
    if (n <= kInline) {
      out->insert(out->end(), inline_cand, inline_cand + n);
      return;
    }
    std::vector<uint64_t> all(n);
    n = compact_->Candidates(mixed, all);
    out->insert(out->end(), all.begin(), all.begin() + static_cast<ptrdiff_t>(n));
  }
  // Exact: the address and kind (ssd::kRecordRow or kRecordTombstone) of
  // `mixed`'s entry; false when it has none.
  bool Find(uint64_t mixed, uint64_t* address, uint8_t* kind) const {
    STRATA_ASSERT(exact_, "Find on a compact index");
    uint64_t payload = 0;
    if (exact_index_->Candidates(mixed, {&payload, 1}) == 0) return false;
    *address = payload >> 1;
    *kind = (payload & 1) != 0 ? ssd::kRecordTombstone : ssd::kRecordRow;
    return true;
  }

  // True when `mixed`'s entry names `address`.
  bool Contains(uint64_t mixed, uint64_t address) const {
    if (!exact_) return compact_->Contains(mixed, address);
    uint64_t at = 0;
    uint8_t kind = 0;
    return Find(mixed, &at, &kind) && at == address;
  }
  // Adds `mixed`'s entry. REQUIRES: none exists.
  void Insert(uint64_t mixed, uint64_t address, uint8_t kind) {
    if (exact_) {
      exact_index_->Insert(mixed, Payload(address, kind));
    } else {
      compact_->Insert(mixed, address);
    }
  }
  // Moves `mixed`'s entry from old_address to {new_address, new_kind};
  // false (nothing changed) when it does not name old_address.
  bool Replace(uint64_t mixed, uint64_t old_address, uint64_t new_address, uint8_t new_kind) {
    if (!exact_) return compact_->Replace(mixed, old_address, new_address);
    uint64_t at = 0;
    uint8_t kind = 0;
    if (!Find(mixed, &at, &kind) || at != old_address) return false;
    return exact_index_->Replace(mixed, Payload(at, kind), Payload(new_address, new_kind));
  }
  // As Replace, when the entry's kind is known too (from Find): an exact
  // index then searches once, not twice.
  bool Replace(uint64_t mixed, uint64_t old_address, uint8_t old_kind, uint64_t new_address,
               uint8_t new_kind) {
    if (!exact_) return compact_->Replace(mixed, old_address, new_address);
    return exact_index_->Replace(mixed, Payload(old_address, old_kind),
                                 Payload(new_address, new_kind));
  }
  // Removes `mixed`'s entry naming `address`; false when there is none.
  bool Erase(uint64_t mixed, uint64_t address) {
    if (!exact_) return compact_->Erase(mixed, address);
    uint64_t at = 0;
    uint8_t kind = 0;
    if (!Find(mixed, &at, &kind) || at != address) return false;
    return exact_index_->Erase(mixed, Payload(at, kind));
  }

  // Exact: removes the entries for which erase(address, kind) is true
  // among those of the partitions holding keys in [first, last] (mixed
  // values; PartitionedIndex::EraseWhere), in one pass; returns how many.
  template <typename F>
  uint64_t EraseWhere(uint64_t first, uint64_t last, F&& erase) {
    STRATA_ASSERT(exact_, "EraseWhere on a compact index");
    return exact_index_->EraseWhere(first, last, [&](uint64_t payload) {
      return erase(payload >> 1, (payload & 1) != 0 ? ssd::kRecordTombstone : ssd::kRecordRow);
    });
  }

  struct BuildEntry {
    uint64_t mixed;
    uint64_t address;
    uint8_t kind;
  };
  // Replaces the content by `entries` (one per key, any order).
  void Build(const std::vector<BuildEntry>& entries) {
    if (exact_) {
      std::vector<ExactIndex::BuildEntry> e;
      e.reserve(entries.size());
      for (const BuildEntry& b : entries) e.push_back({b.mixed, Payload(b.address, b.kind)});
      exact_index_->Build(std::move(e));
    } else {
      std::vector<CompactIndex::BuildEntry> e;
      e.reserve(entries.size());
      for (const BuildEntry& b : entries) e.push_back({b.mixed, b.address});
      compact_->Build(std::move(e));
    }
  }

  // DRAM held by the index.
  uint64_t MemoryBytes() const {
    return exact_ ? exact_index_->MemoryBytes() : compact_->MemoryBytes();
  }

 private:
  static uint64_t Payload(uint64_t address, uint8_t kind) {
    return address << 1 | (kind == ssd::kRecordTombstone ? 1 : 0);
  }

  bool exact_ = false;
  // Exactly one is constructed (each holds a directory of 2^kDepthMin
  // partitions, about 100 KB, even when empty).
  std::optional<CompactIndex> compact_;
  std::optional<ExactIndex> exact_index_;
};

}  // namespace strata::storage
