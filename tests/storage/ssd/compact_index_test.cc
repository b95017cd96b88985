// strata-test-labels: unit
// CompactIndex against a std::map model (mixed key -> address, and the
// "records": address -> mixed key, which the index's user reads to resolve
// candidates): inserts, updates (Replace), erases, keys whose fields collide
// (equal high bits, differing low bits), partitions that split down to the
// fewest known bits and then grow, Build, and the DRAM bound of at most 8
// bytes per key at 10^6 keys. ExactIndex (the same template with full-key
// fields) against a std::map alone: its lookups need no record.
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
    const uint64_t addr = next_address++ % (CompactIndex::kPayloadMax + 1);
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

// Shared by both harnesses (Harness, ExactHarness: Put, Erase, Check, keys).

// 20,000 random keys and the extremes.
std::vector<uint64_t> RandomPool(std::mt19937_64& rng) {
  std::vector<uint64_t> pool;
  for (int i = 0; i < 20000; ++i) pool.push_back(rng());
  pool.push_back(0);
  pool.push_back(~uint64_t{0});
  return pool;
}

// `ops` puts and erases (one in `erase_one_in`) of keys drawn from `pool`,
// checked every `check_every` ops and at the end.
template <typename H>
void RandomOps(H& h, std::mt19937_64& rng, const std::vector<uint64_t>& pool, int ops,
               int erase_one_in, int check_every) {
  for (int op = 0; op < ops; ++op) {
    const uint64_t mixed = pool[rng() % pool.size()];
    if (rng() % erase_one_in == 0) {
      h.Erase(mixed);
    } else {
      h.Put(mixed);
    }
    if (op % check_every == check_every - 1) h.Check(rng);
  }
  h.Check(rng);
}

// 60,000 keys sharing their top 16 bits, all in one partition of a new
// index (which splits): put, checked, a third erased, a fifth put again.
template <typename H>
void CrowdOnePrefix(H& h, std::mt19937_64& rng) {
  const uint64_t prefix = uint64_t{0xBEEF} << 48;
  std::vector<uint64_t> keys;
  for (int i = 0; i < 60000; ++i) keys.push_back(prefix | (rng() >> 16));
  for (uint64_t mixed : keys) h.Put(mixed);
  h.Check(rng);
  for (size_t i = 0; i < keys.size(); i += 3) h.Erase(keys[i]);
  for (size_t i = 0; i < keys.size(); i += 5) h.Put(keys[i]);
  h.Check(rng);
}

// 100,000 keys put, the index rebuilt from the model, checked, then 5,000
// of its keys updated and 5,000 new ones put.
template <typename H>
void RebuildAndUpdate(H& h, std::mt19937_64& rng) {
  for (int i = 0; i < 100000; ++i) h.Put(rng());
  std::vector<typename decltype(h.index)::BuildEntry> entries;
  for (const auto& [mixed, payload] : h.keys) entries.push_back({mixed, payload});
  h.index.Build(std::move(entries));
  h.Check(rng);
  std::vector<uint64_t> some;
  for (const auto& [mixed, payload] : h.keys) {
    if (some.size() < 5000) some.push_back(mixed);
  }
  for (uint64_t mixed : some) h.Put(mixed);
  for (int i = 0; i < 5000; ++i) h.Put(rng());
  h.Check(rng);
}

TEST(CompactIndexTest, RandomOpsMatchMap) {
  std::mt19937_64 rng(11);
  Harness h;
  RandomOps(h, rng, RandomPool(rng), 200000, 4, 50000);
}

TEST(CompactIndexTest, CollidingFieldsAreResolvedByTheirRecords) {
  std::mt19937_64 rng(12);
  Harness h;
  // Keys equal in their top 40 bits: every field (top 12 + 22 bits) is the
  // same, so each lookup has every one of them as a candidate.
  const uint64_t base = 0x123456789Aull << 24;
  std::vector<uint64_t> keys;
  for (uint64_t low = 0; low < 40; ++low) keys.push_back(base | (low * 0x3F1u));
  RandomOps(h, rng, keys, 4000, 3, 4000);
  std::vector<uint64_t> cand(64);
  EXPECT_EQ(h.index.Candidates(base, cand), h.keys.size());
}

TEST(CompactIndexTest, SplitsDownToTheFewestKnownBitsThenGrow) {
  std::mt19937_64 rng(13);
  Harness h;
  // The crowded partition splits (doubling the directory) until its fields
  // know kKnownBitsMin bits, then grows past kPartitionEntriesMax.
  CrowdOnePrefix(h, rng);
  EXPECT_GT(h.index.depth(), CompactIndex::kDepthMin);
  EXPECT_GT(h.index.partitions(), size_t{1} << CompactIndex::kDepthMin);
}

TEST(CompactIndexTest, BuildMatchesInsertsAndTakesUpdates) {
  std::mt19937_64 rng(14);
  Harness h;
  RebuildAndUpdate(h, rng);
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

// ExactIndex against a std::map (mixed key -> payload) without any record:
// its lookups must be exact by themselves (at most one candidate, the key's
// own), through random ops, keys sharing all but their low bits, splits of a
// crowded prefix and Build.
struct ExactHarness {
  ExactIndex index;
  std::map<uint64_t, uint64_t> keys;  // mixed -> payload
  uint64_t next_payload = 0;

  // The payload of `mixed`'s entry, or ~0 when it has none.
  uint64_t Find(uint64_t mixed) const {
    std::vector<uint64_t> cand(2);
    const size_t n = index.Candidates(mixed, cand);
    EXPECT_LE(n, 1u) << "mixed " << mixed << " has " << n << " candidates";
    return n == 0 ? ~uint64_t{0} : cand[0];
  }
  void Put(uint64_t mixed) {
    // Payloads up to the top bit (the store's tombstone bit is the low one).
    const uint64_t payload = (next_payload++ * 0x9E3779B97Full) & ExactIndex::kPayloadMax;
    const uint64_t old = Find(mixed);
    if (old == ~uint64_t{0}) {
      index.Insert(mixed, payload);
    } else {
      ASSERT_TRUE(index.Replace(mixed, old, payload));
    }
    keys[mixed] = payload;
  }
  void Erase(uint64_t mixed) {
    auto it = keys.find(mixed);
    if (it == keys.end()) {
      EXPECT_EQ(Find(mixed), ~uint64_t{0});
      return;
    }
    EXPECT_FALSE(index.Erase(mixed, it->second ^ 1));  // wrong payload: kept
    ASSERT_TRUE(index.Erase(mixed, it->second));
    keys.erase(it);
  }
  void Check(std::mt19937_64& rng) const {
    ASSERT_EQ(index.size(), keys.size());
    for (const auto& [mixed, payload] : keys) {
      ASSERT_EQ(Find(mixed), payload) << "mixed " << mixed;
      ASSERT_TRUE(index.Contains(mixed, payload));
      // Neighbours in every bit position are other keys, not this one.
      for (int b = 0; b < 64; b += 7) {
        const uint64_t other = mixed ^ (uint64_t{1} << b);
        if (keys.count(other) == 0) {
          ASSERT_EQ(Find(other), ~uint64_t{0}) << other;
        }
      }
    }
    for (int i = 0; i < 1000; ++i) {
      const uint64_t mixed = rng();
      if (keys.count(mixed) == 0) {
        ASSERT_EQ(Find(mixed), ~uint64_t{0});
      }
    }
    std::map<uint64_t, int> listed;
    index.ForEach([&](uint64_t payload) { ++listed[payload]; });
    std::map<uint64_t, int> expected;
    for (const auto& [mixed, payload] : keys) ++expected[payload];
    ASSERT_EQ(listed, expected);
  }
};

TEST(ExactIndexTest, RandomOpsMatchMap) {
  std::mt19937_64 rng(21);
  ExactHarness h;
  RandomOps(h, rng, RandomPool(rng), 200000, 4, 50000);
}

// EraseWhere visits every partition holding keys of its span and removes
// the entries its predicate picks (a merge's switch: those naming the
// merged segments, which hold keys of the merged range only), for a span
// of part of one partition, a quarter and the whole key space; the index
// stays searchable (erases, puts after).
TEST(ExactIndexTest, EraseWherePicksAmongThePartitionsOfItsSpan) {
  std::mt19937_64 rng(26);
  ExactHarness h;
  for (int i = 0; i < 60000; ++i) h.Put(rng());
  const std::vector<std::pair<uint64_t, uint64_t>> spans = {
      {0x1234ull << 48, (0x1234ull << 48) | 0xFFFFFFFFFFFull},         // inside a partition
      {uint64_t{3} << 62, (uint64_t{3} << 62) | (~uint64_t{0} >> 2)},  // a quarter
      {0, ~uint64_t{0}}};                                              // everything
  for (const auto& span : spans) {
    const uint64_t first = span.first;
    const uint64_t last = span.second;
    // The predicate knows each payload's key (as a merge knows its slots).
    std::map<uint64_t, uint64_t> key_of;  // payload -> mixed
    for (const auto& [mixed, payload] : h.keys) key_of[payload] = mixed;
    auto picked = [&](uint64_t payload) {
      const uint64_t mixed = key_of.at(payload);
      return mixed >= first && mixed <= last && payload % 3 == 0;
    };
    uint64_t want = 0;
    for (auto it = h.keys.begin(); it != h.keys.end();) {
      if (picked(it->second)) {
        it = h.keys.erase(it);
        ++want;
      } else {
        ++it;
      }
    }
    EXPECT_EQ(h.index.EraseWhere(first, last, picked), want);
    h.Check(rng);
    for (int i = 0; i < 2000; ++i) h.Put(rng());  // and it takes inserts again
    h.Check(rng);
  }
}

TEST(ExactIndexTest, KeysDifferingInTheirLowestBitsAreTold) {
  std::mt19937_64 rng(22);
  ExactHarness h;
  // Keys equal in their top 56 bits: one partition, CompactIndex would see
  // one field for all of them.
  const uint64_t base = 0x123456789ABCDEull << 8;
  std::vector<uint64_t> keys;
  for (uint64_t low = 0; low < 256; ++low) keys.push_back(base | low);
  RandomOps(h, rng, keys, 4000, 3, 4000);
}

TEST(ExactIndexTest, SplitsStayExact) {
  std::mt19937_64 rng(23);
  ExactHarness h;
  // The crowded partition splits far past CompactIndex's fewest known bits.
  CrowdOnePrefix(h, rng);
  EXPECT_GT(h.index.depth(), 20u);  // 60000 keys of one 16-bit prefix
}

TEST(ExactIndexTest, BuildMatchesInsertsAndTakesUpdates) {
  std::mt19937_64 rng(24);
  ExactHarness h;
  RebuildAndUpdate(h, rng);
}

TEST(ExactIndexTest, BuildDeeperThanTheFieldStaysExact) {
  // Past 2^kDepthMin x kPartitionEntriesBuilt keys Build's partitions have a
  // longer prefix, and the fields hold the 64 - depth bits after it.
  std::mt19937_64 rng(26);
  constexpr uint64_t kKeys = 2200000;
  std::vector<ExactIndex::BuildEntry> entries;
  for (uint64_t i = 0; i < kKeys; ++i) entries.push_back({rng(), i});
  ExactIndex index;
  index.Build(entries);
  ASSERT_GT(index.depth(), ExactIndex::kDepthMin);
  std::vector<uint64_t> cand(2);
  for (uint64_t i = 0; i < kKeys; i += 97) {
    const uint64_t mixed = entries[i].mixed;
    ASSERT_EQ(index.Candidates(mixed, cand), 1u);
    ASSERT_EQ(cand[0], i);
    for (int b = 0; b < 64; ++b) {
      ASSERT_EQ(index.Candidates(mixed ^ (uint64_t{1} << b), cand), 0u) << i << " bit " << b;
    }
    ASSERT_TRUE(index.Replace(mixed, i, i + kKeys));
    ASSERT_TRUE(index.Erase(mixed, i + kKeys));
    ASSERT_EQ(index.Candidates(mixed, cand), 0u);
    index.Insert(mixed, i);
  }
  ASSERT_EQ(index.size(), kKeys);
}

TEST(ExactIndexTest, BytesPerKeyAtAMillionKeys) {
  std::mt19937_64 rng(25);
  ExactIndex index;
  constexpr uint64_t kKeys = 1000000;
  for (uint64_t i = 0; i < kKeys; ++i) index.Insert(rng(), i);
  ASSERT_EQ(index.size(), kKeys);
  const double inserted = double(index.MemoryBytes()) / kKeys;
  std::vector<ExactIndex::BuildEntry> entries;
  for (uint64_t i = 0; i < kKeys; ++i) entries.push_back({rng(), i});
  index.Build(std::move(entries));
  const double built = double(index.MemoryBytes()) / kKeys;
  // 11-byte entries plus growth slack (1/8 at most) and partition headers.
  EXPECT_LE(inserted, 12.5);
  EXPECT_LE(built, 12.5);
  RecordProperty("bytes_per_key_inserted", std::to_string(inserted));
  RecordProperty("bytes_per_key_built", std::to_string(built));
}

}  // namespace
}  // namespace strata::storage
