// CompactIndex and ExactIndex: the DRAM index of the native store's format
// version 2 (docs/ssd-format.md, "Native format, version 2"): for every key of
// a table a payload (the address of its newest record in the table's log).
// Both are one template, PartitionedIndex, with different entry layouts:
//
// - CompactIndex: 7-byte entries {field (22 bits), address (34 bits)}, 7
//   bytes per key plus slack (at most 8 on average). The field holds only 22
//   bits of the key, so a lookup yields candidates: the caller reads each
//   candidate's record and compares its key.
// - ExactIndex: 11-byte entries {field (52 bits), payload (35 bits)}: the
//   field holds every bit of the mixed key the partition's prefix does not, so
//   an entry names exactly one key (at most one candidate, no read needed to
//   tell an overwrite from another key). The store's payload is the record's
//   address << 1 | tombstone bit. About 11.7 bytes per key with slack.
//
// Keys are placed by their mixed value m = MixKey(key) (a bijection). The
// index is extendible: a directory of 2^depth partition numbers, indexed by
// the top `depth` bits of m; a partition of local depth d holds the keys
// whose top d bits are its prefix. A partition is a sorted array of entries
// {field, payload}: the field holds the `known` bits of m after the prefix
// (min(kFieldBits, 64 - d) when the partition was built, fewer after
// splits), left-aligned. A lookup yields the payloads of every entry whose
// field matches the key's (candidates): for CompactIndex, one in the common
// case, two on a field collision (about partition size / 2^known of
// lookups), none for a key with no entry; for ExactIndex at most one.
//
// A partition that passes kPartitionEntriesMax entries splits in two by its
// next key bit, the top bit of its fields (which then know one bit less,
// and which the new prefix holds: ExactIndex stays exact), until fields
// reach kKnownBitsMin bits; past that it grows instead. A rebuild (Build, at
// open) gives every partition full fields again. Entries of one partition
// are sorted by (field, payload), so an entry is found by its key's field
// and its payload without reading anything: the cleaner and a put that knows
// the old address replace entries that way.
//
// Thread safety: none; the table's lock guards it (shared for lookups).
// Ownership: owns its arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace strata::storage {

struct CompactIndexTraits {
  using Value = uint64_t;  // an entry, loaded
  static constexpr uint32_t kEntryBytes = 7;
  static constexpr uint32_t kFieldBits = 22;
  static constexpr uint32_t kPayloadBits = 34;
  // Splits stop here (and partitions grow instead): fewer known bits mean
  // more field collisions, each one more read.
  static constexpr uint32_t kKnownBitsMin = 14;
};

struct ExactIndexTraits {
  using Value = unsigned __int128;
  static constexpr uint32_t kEntryBytes = 11;
  // 64 - kDepthMin: every bit after the smallest prefix.
  static constexpr uint32_t kFieldBits = 52;
  static constexpr uint32_t kPayloadBits = 35;
  static constexpr uint32_t kKnownBitsMin = 0;  // any split keeps it exact
};

template <typename Traits>
class PartitionedIndex {
 public:
  using Value = typename Traits::Value;
  static constexpr uint32_t kEntryBytes = Traits::kEntryBytes;
  static constexpr uint32_t kFieldBits = Traits::kFieldBits;
  static constexpr uint32_t kPayloadBits = Traits::kPayloadBits;
  static constexpr uint64_t kPayloadMax = (uint64_t{1} << kPayloadBits) - 1;
  static constexpr uint32_t kKnownBitsMin = Traits::kKnownBitsMin;
  static constexpr uint32_t kPartitionEntriesMax = 2048;
  // Entries a partition holds on average right after Build.
  static constexpr uint32_t kPartitionEntriesBuilt = 512;
  // Directory depth of a new (empty) index: small tables pay 2^kDepthMin
  // partitions (about 100 KB), large ones start with few splits.
  static constexpr uint32_t kDepthMin = 12;
  static constexpr uint32_t kDepthMax = 28;
  static_assert(kFieldBits + kPayloadBits <= 8 * kEntryBytes && kEntryBytes <= sizeof(Value));
  static_assert(kFieldBits <= 64 - kDepthMin && kKnownBitsMin < kFieldBits);

  PartitionedIndex() { Clear(); }
  PartitionedIndex(const PartitionedIndex&) = delete;
  PartitionedIndex& operator=(const PartitionedIndex&) = delete;
  PartitionedIndex(PartitionedIndex&&) = default;
  PartitionedIndex& operator=(PartitionedIndex&&) = default;

  // Empties the index (depth kDepthMin).
  void Clear();
  // Replaces the content by `entries` ({mixed key, payload}, any order, one
  // per key), with full fields and a depth giving partitions of about
  // kPartitionEntriesBuilt entries.
  struct BuildEntry {
    uint64_t mixed;
    uint64_t payload;
  };
  void Build(std::vector<BuildEntry> entries);

  // Writes the payloads of the entries whose field matches `mixed` into
  // `out` (at most out.size()); returns how many there are (may exceed
  // out.size(): the caller retries with a larger span).
  size_t Candidates(uint64_t mixed, std::span<uint64_t> out) const;
  // True when an entry {mixed's field, payload} exists.
  bool Contains(uint64_t mixed, uint64_t payload) const;
  // Adds an entry. REQUIRES: no entry of this key (the caller resolved the
  // candidates), payload <= kPayloadMax.
  void Insert(uint64_t mixed, uint64_t payload);
  // Moves the entry {mixed, old_payload} to new_payload; false (nothing
  // changed) when there is no such entry.
  bool Replace(uint64_t mixed, uint64_t old_payload, uint64_t new_payload);
  // Removes the entry {mixed, payload}; false when there is none.
  bool Erase(uint64_t mixed, uint64_t payload);

  // Removes the entries whose payload `erase(payload)` picks, offering it
  // every entry of the partitions that hold keys in [first, last] (mixed
  // values; entries of nearby keys sharing those partitions too: the
  // predicate must tell them), in one pass without a search per entry;
  // returns how many it removed.
  template <typename F>
  uint64_t EraseWhere(uint64_t first, uint64_t last, F&& erase) {
    uint64_t erased = 0;
    const size_t lo = depth_ == 0 ? 0 : static_cast<size_t>(first >> (64 - depth_));
    const size_t hi = depth_ == 0 ? 0 : static_cast<size_t>(last >> (64 - depth_));
    for (size_t d = lo; d <= hi; ++d) {
      // A partition spans a run of directory entries: visit it once.
      if (d > lo && dir_[d] == dir_[d - 1]) continue;
      Partition& p = parts_[dir_[d]];
      uint32_t kept = 0;
      for (uint32_t i = 0; i < p.size; ++i) {
        const Value v = Load(p, i);
        if (erase(static_cast<uint64_t>(v & kPayloadMax))) continue;
        if (kept != i) Store(p, kept, v);
        ++kept;
      }
      erased += p.size - kept;
      size_ -= p.size - kept;
      p.size = kept;
      ShrinkIfSparse(p);
    }
    return erased;
  }

  // Calls fn(payload) for every entry (order unspecified).
  template <typename F>
  void ForEach(F&& fn) const {
    for (const Partition& p : parts_) {
      for (uint32_t i = 0; i < p.size; ++i) fn(static_cast<uint64_t>(Load(p, i) & kPayloadMax));
    }
  }

  uint64_t size() const { return size_; }
  uint32_t depth() const { return depth_; }
  size_t partitions() const { return parts_.size(); }
  // DRAM held: directory, partition headers and entry arrays (capacity).
  uint64_t MemoryBytes() const;

 private:
  struct Partition {
    std::unique_ptr<uint8_t[]> data;  // capacity x kEntryBytes
    uint32_t size = 0;
    uint32_t capacity = 0;
    uint8_t depth = 0;  // local depth: prefix bits
    uint8_t known = 0;  // bits of each field that are valid (from the top)
  };

  static Value Load(const Partition& p, uint32_t i);
  static void Store(Partition& p, uint32_t i, Value v);
  // Bits of a field a partition of `depth` knows when (re)built.
  static uint32_t FullKnown(uint32_t depth) {
    return kFieldBits < 64 - depth ? kFieldBits : 64 - depth;
  }
  // The entry {field of `mixed` in a partition of `depth` and `known`,
  // left-aligned; payload}.
  static Value EntryOf(uint64_t mixed, uint32_t depth, uint32_t known, uint64_t payload);
  uint32_t PartOf(uint64_t mixed) const {
    return dir_[depth_ == 0 ? 0 : static_cast<size_t>(mixed >> (64 - depth_))];
  }
  // First position in p whose entry is >= v.
  static uint32_t LowerBound(const Partition& p, Value v);
  static void Grow(Partition& p, uint32_t need);
  // An array down to a quarter of its capacity gives the rest back.
  static void ShrinkIfSparse(Partition& p);
  // Splits partition `index` by its next bit (doubling the directory when
  // its depth is the directory's).
  void Split(uint32_t index);

  std::vector<uint32_t> dir_;  // 2^depth_ partition numbers
  std::vector<Partition> parts_;
  uint32_t depth_ = 0;
  uint64_t size_ = 0;
};

using CompactIndex = PartitionedIndex<CompactIndexTraits>;
using ExactIndex = PartitionedIndex<ExactIndexTraits>;
extern template class PartitionedIndex<CompactIndexTraits>;
extern template class PartitionedIndex<ExactIndexTraits>;

}  // namespace strata::storage
