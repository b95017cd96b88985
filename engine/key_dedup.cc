#include "engine/key_dedup.h"

#include <algorithm>
#include <bit>

#include "base/hash.h"

namespace strata::engine {

void KeyDedup::Distinct(std::span<const Key> keys, std::vector<Key>* unique) {
  unique->clear();
  if (keys.empty()) return;
  // At most half full: a power of two at least twice the keys.
  const uint64_t want = std::bit_ceil(std::max<uint64_t>(keys.size() * 2, 16));
  if (slots_.size() < want) {
    slots_.assign(want, 0);
    stamps_.assign(want, 0);
    epoch_ = 0;
  }
  if (++epoch_ == 0) {  // wrapped: every old stamp could match again
    std::fill(stamps_.begin(), stamps_.end(), 0);
    epoch_ = 1;
  }
  const uint64_t mask = slots_.size() - 1;
  for (Key key : keys) {
    for (uint64_t i = MixMurmur64(key) & mask;; i = (i + 1) & mask) {
      if (stamps_[i] != epoch_) {
        stamps_[i] = epoch_;
        slots_[i] = key;
        unique->push_back(key);
        break;
      }
      if (slots_[i] == key) break;
    }
  }
}

}  // namespace strata::engine
