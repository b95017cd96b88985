// strata-test-labels: unit
// The directory of a key-ranges base segment (BaseSegment, log_store.h):
// Candidates, which starts its search where a key would sit, gives exactly
// the run std::equal_range gives over the 2-byte values, for evenly spread
// keys, clustered keys, long runs of one value and keys outside the run.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "storage/ssd/log_store.h"

namespace strata::storage::logstore {
namespace {

// Checks Candidates against std::equal_range for the keys in `mixed`
// (sorted) and for probes between and around them.
void ExpectSameRuns(std::vector<uint64_t> mixed, std::mt19937_64& rng) {
  std::sort(mixed.begin(), mixed.end());
  mixed.erase(std::unique(mixed.begin(), mixed.end()), mixed.end());
  BaseSegment b;
  b.Build(mixed);
  std::vector<uint64_t> probes = mixed;
  for (int i = 0; i < 2000; ++i) probes.push_back(b.first + rng() % (b.last - b.first + 1));
  probes.push_back(b.first);
  probes.push_back(b.last);
  for (uint64_t m : probes) {
    const auto v = static_cast<uint16_t>((m - b.first) >> b.shift);
    const auto want = std::equal_range(b.fp.begin(), b.fp.end(), v);
    uint64_t lo = 0, hi = 0;
    b.Candidates(m, &lo, &hi);
    ASSERT_EQ(lo, static_cast<uint64_t>(want.first - b.fp.begin())) << "mixed " << m;
    ASSERT_EQ(hi, static_cast<uint64_t>(want.second - b.fp.begin())) << "mixed " << m;
  }
}

TEST(BaseDirectoryTest, CandidatesMatchEqualRangeForSpreadKeys) {
  std::mt19937_64 rng(1);
  for (size_t n : {1u, 2u, 3u, 17u, 1000u, 16000u}) {
    std::vector<uint64_t> mixed(n);
    for (uint64_t& m : mixed) m = rng();
    ExpectSameRuns(mixed, rng);
  }
}

TEST(BaseDirectoryTest, CandidatesMatchEqualRangeForClusteredKeysAndLongRuns) {
  std::mt19937_64 rng(2);
  // Most keys in a narrow band, a few far out: the interpolated start is far
  // from the run, so the search gallops.
  std::vector<uint64_t> mixed;
  for (int i = 0; i < 5000; ++i) mixed.push_back((uint64_t{1} << 40) + rng() % 100000);
  for (int i = 0; i < 20; ++i) mixed.push_back(rng());
  ExpectSameRuns(mixed, rng);
  // A span too wide for 16 bits: many keys share each value (runs of
  // hundreds), and a segment of one value only.
  std::vector<uint64_t> runs;
  for (int i = 0; i < 6000; ++i) runs.push_back(rng() % 64 * (uint64_t{1} << 50) + rng() % 1000);
  ExpectSameRuns(runs, rng);
  std::vector<uint64_t> one_value;
  for (uint64_t i = 0; i < 300; ++i) one_value.push_back((uint64_t{7} << 60) + i);
  one_value.push_back((uint64_t{7} << 60) + (uint64_t{1} << 40));
  ExpectSameRuns(one_value, rng);
}

}  // namespace
}  // namespace strata::storage::logstore
