// strata-test-labels: unit
// CompactIndex against a std::map model (mixed key -> address, and the
// "records": address -> mixed key, which the index's user reads to resolve
// candidates): inserts, updates (Replace), erases, keys whose fields collide
// (equal high bits, differing low bits), partitions that split down to the
// fewest known bits and then grow, Build, and the DRAM bound of at most 8
// bytes per key at 10^6 keys.
#include "storage/ssd/compact_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace strata::storage {
namespace {

// The index with its user's resolution of candidates: the key's entry is the
// candidate whose record (model `records`) holds the key.
struct Harness {
  CompactIndex index;
  std::map<uint64_t, uint64_t> keys;     // mixed -> address
  std::map<uint64_t, uint64_t> records;  // address -> mixed (live entries)
  uint64_t next_address = 0;

  // The address of `mixed`'s entry, or ~0 when it has none.
  uint64_t Resolve(uint64_t mixed) const {
    std::vector<uint64_t> cand(4);
    size_t n = index.Candidates(mixed, cand);
    if (n > cand.size()) {
      cand.resize(n);
      n = index.Candidates(mixed, cand);
    }
    uint64_t found = ~uint64_t{0};
    for (size_t i = 0; i < n; ++i) {
      auto it = records.find(cand[i]);
      EXPECT_TRUE(it != records.end()) << "candidate " << cand[i] << " names no record";
      if (it != records.end() && it->second == mixed) {
        EXPECT_EQ(found, ~uint64_t{0}) << "two entries for mixed " << mixed;
        found = cand[i];
      }
    }
    return found;
  }
  void Put(uint64_t mixed) {
    const uint64_t addr = next_address++ % (CompactIndex::kAddressMax + 1);
    const uint64_t old = Resolve(mixed);
    if (old == ~uint64_t{0}) {
      index.Insert(mixed, addr);
    } else {
      ASSERT_TRUE(index.Replace(mixed, old, addr));
      records.erase(old);
    }
    keys[mixed] = addr;
    records[addr] = mixed;
  }
  void Erase(uint64_t mixed) {
    auto it = keys.find(mixed);
    if (it == keys.end()) {
      EXPECT_FALSE(index.Erase(mixed, next_address + 12345));
      return;
    }
    ASSERT_TRUE(index.Erase(mixed, it->second));
    records.erase(it->second);
    keys.erase(it);
  }
  void Check(std::mt19937_64& rng) const {
    ASSERT_EQ(index.size(), keys.size());
    for (const auto& [mixed, addr] : keys) {
      ASSERT_EQ(Resolve(mixed), addr) << "mixed " << mixed;
      ASSERT_TRUE(index.Contains(mixed, addr));
    }
    for (int i = 0; i < 1000; ++i) {
      const uint64_t mixed = rng();
      if (keys.count(mixed) == 0) {
        ASSERT_EQ(Resolve(mixed), ~uint64_t{0});
      }
    }
    std::map<uint64_t, int> listed;
    index.ForEach([&](uint64_t addr) { ++listed[addr]; });
    ASSERT_EQ(listed.size(), records.size());
    for (const auto& [addr, count] : listed) {
      ASSERT_EQ(count, 1);
      ASSERT_EQ(records.count(addr), 1u) << addr;
    }
  }
};

TEST(CompactIndexTest, RandomOpsMatchMap) {
  std::mt19937_64 rng(11);
  Harness h;
  std::vector<uint64_t> pool;
  for (int i = 0; i < 20000; ++i) pool.push_back(rng());
  pool.push_back(0);
  pool.push_back(~uint64_t{0});
  for (int op = 0; op < 200000; ++op) {
    const uint64_t mixed = pool[rng() % pool.size()];
    if (rng() % 4 == 0) {
      h.Erase(mixed);
    } else {
      h.Put(mixed);
    }
    if (op % 50000 == 49999) h.Check(rng);
  }
  h.Check(rng);
}

TEST(CompactIndexTest, CollidingFieldsAreResolvedByTheirRecords) {
  std::mt19937_64 rng(12);
  Harness h;
  // Keys equal in their top 40 bits: every field (top 12 + 22 bits) is the
  // same, so each lookup has every one of them as a candidate.
  const uint64_t base = 0x123456789Aull << 24;
  std::vector<uint64_t> keys;
  for (uint64_t low = 0; low < 40; ++low) keys.push_back(base | (low * 0x3F1u));
  for (int op = 0; op < 4000; ++op) {
    const uint64_t mixed = keys[rng() % keys.size()];
    if (rng() % 3 == 0) {
      h.Erase(mixed);
    } else {
      h.Put(mixed);
    }
  }
  h.Check(rng);
  std::vector<uint64_t> cand(64);
  EXPECT_EQ(h.index.Candidates(base, cand), h.keys.size());
}

TEST(CompactIndexTest, SplitsDownToTheFewestKnownBitsThenGrow) {
  std::mt19937_64 rng(13);
  Harness h;
  // Keys sharing their top 16 bits all land in one partition of the new
  // index, which splits (doubling the directory) until its fields know
  // kKnownBitsMin bits, then grows past kPartitionEntriesMax.
  const uint64_t prefix = uint64_t{0xBEEF} << 48;
  std::vector<uint64_t> keys;
  for (int i = 0; i < 60000; ++i) keys.push_back(prefix | (rng() >> 16));
  for (uint64_t mixed : keys) h.Put(mixed);
  EXPECT_GT(h.index.depth(), CompactIndex::kDepthMin);
  EXPECT_GT(h.index.partitions(), size_t{1} << CompactIndex::kDepthMin);
  h.Check(rng);
  for (size_t i = 0; i < keys.size(); i += 3) h.Erase(keys[i]);
  for (size_t i = 0; i < keys.size(); i += 5) h.Put(keys[i]);
  h.Check(rng);
}

TEST(CompactIndexTest, BuildMatchesInsertsAndTakesUpdates) {
  std::mt19937_64 rng(14);
  Harness h;
  for (int i = 0; i < 100000; ++i) h.Put(rng());
  std::vector<CompactIndex::BuildEntry> entries;
  for (const auto& [mixed, addr] : h.keys) entries.push_back({mixed, addr});
  h.index.Build(std::move(entries));
  h.Check(rng);
  std::vector<uint64_t> some;
  for (const auto& [mixed, addr] : h.keys) {
    if (some.size() < 5000) some.push_back(mixed);
  }
  for (uint64_t mixed : some) h.Put(mixed);
  for (int i = 0; i < 5000; ++i) h.Put(rng());
  h.Check(rng);
}

TEST(CompactIndexTest, AtMostEightBytesPerKeyAtAMillionKeys) {
  std::mt19937_64 rng(15);
  CompactIndex index;
  constexpr uint64_t kKeys = 1000000;
  for (uint64_t i = 0; i < kKeys; ++i) index.Insert(rng(), i);
  ASSERT_EQ(index.size(), kKeys);
  const double inserted = double(index.MemoryBytes()) / kKeys;
  EXPECT_LE(inserted, 8.0);
  std::vector<CompactIndex::BuildEntry> entries;
  for (uint64_t i = 0; i < kKeys; ++i) entries.push_back({rng(), i});
  index.Build(std::move(entries));
  const double built = double(index.MemoryBytes()) / kKeys;
  EXPECT_LE(built, 8.0);
  RecordProperty("bytes_per_key_inserted", std::to_string(inserted));
  RecordProperty("bytes_per_key_built", std::to_string(built));
}

}  // namespace
}  // namespace strata::storage
