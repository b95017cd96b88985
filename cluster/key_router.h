// KeyRouter: a batch's distinct keys grouped by their owner rank
// (ClusterOwner), and where each of the batch's keys went, so that the rows
// coming back from the owners scatter into the caller's order and the
// gradients of duplicates sum before they travel. Dedup by open addressing
// over scratch kept from call to call (no allocation once grown, no sort).
//
// Thread safety: none; one owner at a time (ClusterImpl, under its
// collective mutex).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/types.h"

namespace strata::cluster {

class KeyRouter {
 public:
  // Routes `keys` of `table` among `world_size` ranks.
  void Route(TableId table, std::span<const Key> keys, uint32_t world_size);

  // The distinct keys, rank 0's first, then rank 1's, ...
  std::span<const Key> grouped() const { return grouped_; }
  // How many of grouped() each rank owns (MPI counts).
  std::span<const int> counts() const { return counts_; }
  // slots()[i]: the position in grouped() of the batch's keys[i].
  std::span<const uint32_t> slots() const { return slots_; }

 private:
  uint32_t Insert(Key key);  // the distinct index of key, adding it when new

  std::vector<Key> grouped_;
  std::vector<int> counts_;
  std::vector<uint32_t> slots_;
  // Scratch: distinct keys in first-seen order, their owners and positions.
  std::vector<Key> unique_;
  std::vector<uint32_t> owner_, position_;
  std::vector<uint32_t> next_;  // per rank, while grouping
  // The hash set: table_[i] indexes unique_ when stamps_[i] == epoch_.
  std::vector<uint32_t> table_;
  std::vector<uint32_t> stamps_;
  uint32_t epoch_ = 0;
};

}  // namespace strata::cluster
