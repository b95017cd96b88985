// KeyRouter (key_router.h).
#include "cluster/key_router.h"

#include <algorithm>
#include <bit>

#include "base/hash.h"
#include "strata/cluster_owner.h"

namespace strata::cluster {

uint32_t KeyRouter::Insert(Key key) {
  const uint64_t mask = table_.size() - 1;
  for (uint64_t i = MixMurmur64(key) & mask;; i = (i + 1) & mask) {
    if (stamps_[i] != epoch_) {
      stamps_[i] = epoch_;
      table_[i] = static_cast<uint32_t>(unique_.size());
      unique_.push_back(key);
      return table_[i];
    }
    if (unique_[table_[i]] == key) return table_[i];
  }
}

void KeyRouter::Route(TableId table, std::span<const Key> keys, uint32_t world_size) {
  const size_t want = std::bit_ceil(std::max<size_t>(16, keys.size() * 2));
  if (table_.size() < want) {
    table_.assign(want, 0);
    stamps_.assign(want, 0);
    epoch_ = 0;
  }
  if (++epoch_ == 0) {  // wrapped: every stamp could look current
    std::fill(stamps_.begin(), stamps_.end(), 0);
    epoch_ = 1;
  }
  unique_.clear();
  slots_.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) slots_[i] = Insert(keys[i]);

  counts_.assign(world_size, 0);
  owner_.resize(unique_.size());
  for (size_t u = 0; u < unique_.size(); ++u) {
    owner_[u] = ClusterOwner(table, unique_[u], world_size);
    ++counts_[owner_[u]];
  }
  next_.assign(world_size, 0);  // the next free position in grouped_ per rank
  uint32_t at = 0;
  for (uint32_t r = 0; r < world_size; ++r) {
    next_[r] = at;
    at += counts_[r];
  }
  grouped_.resize(unique_.size());
  position_.resize(unique_.size());
  for (size_t u = 0; u < unique_.size(); ++u) {
    position_[u] = next_[owner_[u]]++;
    grouped_[position_[u]] = unique_[u];
  }
  for (uint32_t& s : slots_) s = position_[s];
}

}  // namespace strata::cluster
