// PageDirectory: the native store's DRAM index of one table. Leaves cover
// consecutive ranges of mixed keys (ssd::MixKey); the directory holds, per
// leaf, its first mixed key, its physical page and its row count (16 bytes per
// leaf, nothing per key). The first leaf starts at 0 and the last ends at
// 2^64-1, so every key has exactly one leaf.
//
// Stored as sorted chunks of at most kChunkLeavesMax leaves so that splitting
// a leaf moves at most one chunk's entries.
//
// Thread safety: none; the owning table's lock guards it. Replace
// invalidates every Handle; find a leaf again by its low_mixed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "storage/ssd/ssd_format.h"

namespace strata::storage {

class PageDirectory {
 public:
  using Leaf = ssd::LeafRecord;
  struct Handle {
    uint32_t chunk = 0;
    uint32_t index = 0;
    friend bool operator==(const Handle&, const Handle&) = default;
    friend auto operator<=>(const Handle&, const Handle&) = default;
  };
  static constexpr uint32_t kChunkLeavesMax = 2048;

  // One empty leaf covering every key.
  PageDirectory();
  // REQUIRES: leaves non-empty, sorted by low_mixed, unique, leaves[0].low_mixed == 0.
  explicit PageDirectory(std::span<const Leaf> leaves);

  Handle Find(uint64_t mixed) const;
  Leaf& at(Handle h) { return chunks_[h.chunk][h.index]; }
  const Leaf& at(Handle h) const { return chunks_[h.chunk][h.index]; }
  // The first leaf, and the one after `h` (valid() false past the end).
  Handle Begin() const { return Handle{0, 0}; }
  Handle Next(Handle h) const;
  bool Valid(Handle h) const { return h.chunk < chunks_.size(); }
  // First mixed key after leaf `h`'s range; false when `h` is the last leaf.
  bool NextLow(Handle h, uint64_t* next_low) const;

  // Replaces leaf `h` by `leaves` (non-empty, sorted, leaves[0].low_mixed
  // equal to the replaced leaf's, all below NextLow(h)).
  void Replace(Handle h, std::span<const Leaf> leaves);

  size_t leaf_count() const { return leaf_count_; }
  // DRAM the directory holds.
  uint64_t MemoryBytes() const;
  // Every leaf, in order.
  std::vector<Leaf> Leaves() const;

 private:
  void RebuildLows();

  std::vector<std::vector<Leaf>> chunks_;  // each non-empty, sorted
  std::vector<uint64_t> chunk_lows_;       // chunks_[i][0].low_mixed
  size_t leaf_count_ = 0;
};

}  // namespace strata::storage
