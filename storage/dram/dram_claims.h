// DramKeyClaims: the keys that in-flight Inserts of the DRAM cache are
// placing, so that at most one Insert handles a key at a time (two Inserts
// of one absent key would otherwise both find it absent and both add it).
// Each claim names its owner (an id per in-flight Insert), so an Insert
// claiming its batch's keys learns of a key it claimed already (a duplicate
// in its batch) from the same probe that claims it. An open-addressing set
// of (table, key, owner) with linear probing and backward-shift erase, grown
// by doubling at load 1/4 (short runs: an erase shifts few entries) and never
// shrunk: no allocation once warm. At most 2^32 entries (the home is taken
// from 32 bits of the key's hash).
//
// Thread safety: none; each DramShard keeps one under its mutation mutex.
// Ownership: owns its entries.
#pragma once

#include <cstdint>
#include <vector>

#include "strata/types.h"

namespace strata::storage {

class DramKeyClaims {
 public:
  enum class Claim {
    kAdded,  // claimed now
    kOwn,    // claimed by this owner already; no change
    kOther,  // claimed by another owner; no change
  };
  // An owner id, distinct from every other id in use (the smallest ids are
  // reused: no allocation once as many owners as ever are in use).
  uint32_t NewOwner();
  // Returns an id NewOwner gave. REQUIRES: none of its claims are left.
  void FreeOwner(uint32_t owner);
  // Claims (table, key) for `owner` (`hash`: DramKeyHash(key)). Inline
  // (below): one call per key of every Insert.
  Claim Add(uint32_t table, Key key, uint64_t hash, uint32_t owner);
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
    uint32_t owner;
  };
  // The home of (table, key) is Mix(table, DramKeyHash(key)) & mask_.
  static uint32_t Mix(uint32_t table, uint64_t hash) {
    return static_cast<uint32_t>(hash ^ (uint64_t{table} * 0x9e3779b97f4a7c15ull));
  }
  uint64_t HomeOf(const Entry& e) const;
  void Grow();

  std::vector<Entry> entries_;
  uint64_t mask_ = 0;
  uint64_t size_ = 0;
  std::vector<uint32_t> free_owners_;  // ids returned, reused last in first out
  uint32_t owners_ = 0;                // ids handed out so far: 0..owners_ - 1
};

inline DramKeyClaims::Claim DramKeyClaims::Add(uint32_t table, Key key, uint64_t hash,
                                               uint32_t owner) {
  if ((size_ + 1) * 4 > entries_.size()) Grow();
  uint64_t at = Mix(table, hash) & mask_;
  while (entries_[at].table_plus1 != 0) {
    if (entries_[at].table_plus1 == table + 1 && entries_[at].key == key) {
      return entries_[at].owner == owner ? Claim::kOwn : Claim::kOther;
    }
    at = (at + 1) & mask_;
  }
  entries_[at] = Entry{key, table + 1, owner};
  ++size_;
  return Claim::kAdded;
}

}  // namespace strata::storage
