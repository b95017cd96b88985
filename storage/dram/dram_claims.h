// DramKeyClaims: the keys that in-flight Inserts of the DRAM cache are
// placing, so that at most one Insert handles a key at a time (two Inserts
// of one absent key would otherwise both find it absent and both add it).
// An open-addressing set of (table, key) with linear probing and
// backward-shift erase, grown by doubling at load 1/4 (short runs: an erase
// shifts few entries) and never shrunk: no allocation once warm. At most
// 2^32 entries (the home is taken from 32 bits of the key's hash).
//
// Thread safety: none; DramCache keeps one under its mutation mutex.
// Ownership: owns its entries.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/types.h"

namespace strata::storage {

class DramKeyClaims {
 public:
  // Claims (table, key) (`hash`: DramKeyHash(key)); false, and no change,
  // when it is claimed already.
  bool Add(uint32_t table, Key key, uint64_t hash);
  // Drops a claim Add made. REQUIRES: claimed.
  void Remove(uint32_t table, Key key, uint64_t hash);
  // Drops every claim.
  void Clear();
  uint64_t size() const { return size_; }
  uint64_t capacity() const { return entries_.size(); }

 private:
  struct Entry {
    Key key;
    uint32_t table_plus1;  // 0: empty
    uint32_t mix;          // Mix(table, hash): the home is mix & mask_
  };
  static uint32_t Mix(uint32_t table, uint64_t hash) {
    return static_cast<uint32_t>(hash ^ (uint64_t{table} * 0x9e3779b97f4a7c15ull));
  }
  void Grow();

  std::vector<Entry> entries_;
  uint64_t mask_ = 0;
  uint64_t size_ = 0;
};

}  // namespace strata::storage
