// DistinctSketch: an estimate of the distinct keys of a stream, in bounded
// memory (k minimum values: the k smallest distinct hashes of the keys;
// (k - 1) / (k-th smallest / 2^64), exact below k keys; about 3% relative
// error at k = 1024, 1024 hashes held). Sizes a table's SSD layout from a
// trace or a dataset (TableOptions::expected_rows), where a factor of two
// is one range bit.
//
// Thread safety: none (one owner). Ownership: holds its hashes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <set>

#include "strata/types.h"

namespace strata::trace {

class DistinctSketch {
 public:
  void Add(Key key) {
    uint64_t h = key + 0x9E3779B97F4A7C15ull;  // splitmix64's finalizer
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    if (smallest_.size() == kK && h >= *smallest_.rbegin()) return;
    if (!smallest_.insert(h).second) return;
    if (smallest_.size() > kK) smallest_.erase(std::prev(smallest_.end()));
  }
  uint64_t Estimate() const {
    if (smallest_.size() < kK) return smallest_.size();
    const double kth = double(*smallest_.rbegin()) / 18446744073709551616.0;
    return static_cast<uint64_t>(double(kK - 1) / std::max(kth, 1e-300));
  }

 private:
  static constexpr size_t kK = 1024;
  std::set<uint64_t> smallest_;
};

}  // namespace strata::trace
