#include "storage/ssd/page_directory.h"

#include <algorithm>

#include "base/assert.h"

namespace strata::storage {

PageDirectory::PageDirectory() {
  chunks_.push_back({Leaf{0, ssd::kNoPage, 0}});
  chunk_lows_.push_back(0);
  leaf_count_ = 1;
}

PageDirectory::PageDirectory(std::span<const Leaf> leaves) {
  STRATA_ASSERT(!leaves.empty() && leaves[0].low_mixed == 0, "directory must start at 0");
  for (size_t i = 0; i < leaves.size(); i += kChunkLeavesMax / 2) {
    const size_t n = std::min<size_t>(kChunkLeavesMax / 2, leaves.size() - i);
    chunks_.emplace_back(leaves.begin() + i, leaves.begin() + i + n);
  }
  leaf_count_ = leaves.size();
  RebuildLows();
}

void PageDirectory::RebuildLows() {
  chunk_lows_.resize(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i) chunk_lows_[i] = chunks_[i][0].low_mixed;
}

PageDirectory::Handle PageDirectory::Find(uint64_t mixed) const {
  // Last chunk whose low <= mixed, then last leaf whose low <= mixed.
  const auto c = std::upper_bound(chunk_lows_.begin(), chunk_lows_.end(), mixed) - 1;
  const auto& chunk = chunks_[c - chunk_lows_.begin()];
  const auto l = std::upper_bound(chunk.begin(), chunk.end(), mixed,
                                  [](uint64_t m, const Leaf& leaf) { return m < leaf.low_mixed; }) -
                 1;
  return Handle{static_cast<uint32_t>(c - chunk_lows_.begin()),
                static_cast<uint32_t>(l - chunk.begin())};
}

PageDirectory::Handle PageDirectory::Next(Handle h) const {
  if (h.index + 1 < chunks_[h.chunk].size()) return Handle{h.chunk, h.index + 1};
  return Handle{h.chunk + 1, 0};
}

bool PageDirectory::NextLow(Handle h, uint64_t* next_low) const {
  const Handle n = Next(h);
  if (!Valid(n)) return false;
  *next_low = at(n).low_mixed;
  return true;
}

void PageDirectory::Replace(Handle h, std::span<const Leaf> leaves) {
  STRATA_ASSERT(!leaves.empty() && leaves[0].low_mixed == at(h).low_mixed,
                "replacement must keep the leaf's low key");
  auto& chunk = chunks_[h.chunk];
  chunk[h.index] = leaves[0];
  chunk.insert(chunk.begin() + h.index + 1, leaves.begin() + 1, leaves.end());
  leaf_count_ += leaves.size() - 1;
  if (chunk.size() > kChunkLeavesMax) {  // split into half-full chunks
    std::vector<std::vector<Leaf>> pieces;
    for (size_t i = kChunkLeavesMax / 2; i < chunk.size(); i += kChunkLeavesMax / 2) {
      const size_t end = std::min<size_t>(chunk.size(), i + kChunkLeavesMax / 2);
      pieces.emplace_back(chunk.begin() + i, chunk.begin() + end);
    }
    chunk.resize(kChunkLeavesMax / 2);
    chunks_.insert(chunks_.begin() + h.chunk + 1, std::make_move_iterator(pieces.begin()),
                   std::make_move_iterator(pieces.end()));
    RebuildLows();
  }
}

uint64_t PageDirectory::MemoryBytes() const {
  uint64_t bytes =
      chunk_lows_.capacity() * sizeof(uint64_t) + chunks_.capacity() * sizeof(std::vector<Leaf>);
  for (const auto& c : chunks_) bytes += c.capacity() * sizeof(Leaf);
  return bytes;
}

std::vector<PageDirectory::Leaf> PageDirectory::Leaves() const {
  std::vector<Leaf> out;
  out.reserve(leaf_count_);
  for (const auto& c : chunks_) out.insert(out.end(), c.begin(), c.end());
  return out;
}

}  // namespace strata::storage
