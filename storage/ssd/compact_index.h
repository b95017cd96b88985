// CompactIndex: the DRAM index of the native store's format version 2
// (docs/ssd-format.md, "Native format, version 2"): for every key of a table
// the address of its newest record in the table's log, in 7 bytes per key
// plus slack (at most 8 bytes per key on average).
//
// Keys are placed by their mixed value m = MixKey(key) (a bijection). The
// index is extendible: a directory of 2^depth partition numbers, indexed by
// the top `depth` bits of m; a partition of local depth d holds the keys
// whose top d bits are its prefix. A partition is a sorted array of 7-byte
// entries {field (22 bits), address (34 bits)}: the field holds the `known`
// bits of m after the prefix (22 when the partition was built, fewer after
// splits), left-aligned. No full key is held: a lookup yields the addresses
// of every entry whose field matches the key's (candidates), and the caller
// reads each candidate's record and compares its key, so a get is one device
// read in the common case (two on a field collision, about partition size /
// 2^known of lookups), none for a key with no candidate.
//
// A partition that passes kPartitionEntriesMax entries splits in two by its
// next key bit, the top bit of its fields (which then know one bit less),
// until fields reach kKnownBitsMin bits; past that it grows instead. A
// rebuild (Build, at open) gives every partition full 22-bit fields again.
// Entries of one partition are sorted by (field, address), so an entry is
// found by its key's field and its address without reading anything: the
// cleaner and a put that knows the old address replace entries that way.
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

class CompactIndex {
 public:
  static constexpr uint32_t kEntryBytes = 7;
  static constexpr uint32_t kAddressBits = 34;
  static constexpr uint64_t kAddressMax = (uint64_t{1} << kAddressBits) - 1;
  static constexpr uint32_t kFieldBits = 22;
  static constexpr uint32_t kKnownBitsMin = 14;
  static constexpr uint32_t kPartitionEntriesMax = 2048;
  // Entries a partition holds on average right after Build.
  static constexpr uint32_t kPartitionEntriesBuilt = 512;
  // Directory depth of a new (empty) index: small tables pay 2^kDepthMin
  // partitions (about 100 KB), large ones start with few splits.
  static constexpr uint32_t kDepthMin = 12;
  static constexpr uint32_t kDepthMax = 28;

  CompactIndex() { Clear(); }
  CompactIndex(const CompactIndex&) = delete;
  CompactIndex& operator=(const CompactIndex&) = delete;
  CompactIndex(CompactIndex&&) = default;
  CompactIndex& operator=(CompactIndex&&) = default;

  // Empties the index (depth kDepthMin).
  void Clear();
  // Replaces the content by `entries` ({mixed key, address}, any order, one
  // per key), with full fields and a depth giving partitions of about
  // kPartitionEntriesBuilt entries.
  struct BuildEntry {
    uint64_t mixed;
    uint64_t address;
  };
  void Build(std::vector<BuildEntry> entries);

  // Writes the addresses of the entries whose field matches `mixed` into
  // `out` (at most out.size()); returns how many there are (may exceed
  // out.size(): the caller retries with a larger span).
  size_t Candidates(uint64_t mixed, std::span<uint64_t> out) const;
  // True when an entry {mixed's field, address} exists.
  bool Contains(uint64_t mixed, uint64_t address) const;
  // Adds an entry. REQUIRES: no entry of this key (the caller resolved the
  // candidates), address <= kAddressMax.
  void Insert(uint64_t mixed, uint64_t address);
  // Moves the entry {mixed, old_address} to new_address; false (nothing
  // changed) when there is no such entry.
  bool Replace(uint64_t mixed, uint64_t old_address, uint64_t new_address);
  // Removes the entry {mixed, address}; false when there is none.
  bool Erase(uint64_t mixed, uint64_t address);

  // Calls fn(address) for every entry (order unspecified).
  template <typename F>
  void ForEach(F&& fn) const {
    for (const Partition& p : parts_) {
      for (uint32_t i = 0; i < p.size; ++i) fn(Load(p, i) & kAddressMax);
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

  static uint64_t Load(const Partition& p, uint32_t i);
  static void Store(Partition& p, uint32_t i, uint64_t v);
  // The field of `mixed` in a partition of `depth` and `known`, left-aligned.
  static uint64_t FieldOf(uint64_t mixed, uint32_t depth, uint32_t known);
  uint32_t PartOf(uint64_t mixed) const {
    return dir_[depth_ == 0 ? 0 : static_cast<size_t>(mixed >> (64 - depth_))];
  }
  // First position in p whose entry is >= v.
  static uint32_t LowerBound(const Partition& p, uint64_t v);
  static void Grow(Partition& p, uint32_t need);
  // Splits partition `index` by its next bit (doubling the directory when
  // its depth is the directory's).
  void Split(uint32_t index);

  std::vector<uint32_t> dir_;  // 2^depth_ partition numbers
  std::vector<Partition> parts_;
  uint32_t depth_ = 0;
  uint64_t size_ = 0;
};

}  // namespace strata::storage
