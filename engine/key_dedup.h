// KeyDedup: the distinct keys of a batch, in first-occurrence order, by open
// addressing over scratch kept from call to call (no allocation once grown,
// no sort). The Pull and Push slow paths use it on the keys T0 lacks.
//
// Thread safety: none; one owner at a time (a table's, under its mutex).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "strata/types.h"

namespace strata::engine {

class KeyDedup {
 public:
  // Replaces *unique with the distinct keys of `keys`, first occurrences
  // first. *unique keeps its capacity.
  void Distinct(std::span<const Key> keys, std::vector<Key>* unique);

 private:
  std::vector<Key> slots_;
  std::vector<uint32_t> stamps_;  // slot i holds a key of this call iff stamps_[i] == epoch_
  uint32_t epoch_ = 0;
};

}  // namespace strata::engine
