// strata-test-labels: unit
#include "engine/frequency_sketch.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace strata::engine {
namespace {

TEST(FrequencySketchTest, NeverBelowTheTruthBeforeAging) {
  FrequencySketch sketch(1 << 12);
  std::unordered_map<Key, uint32_t> truth;
  std::mt19937_64 rng(1);
  std::vector<Key> keys;
  for (int i = 0; i < 20000; ++i) {  // below 10 x width: no aging yet
    Key k = rng() % 3000;
    keys.assign(1, k);
    sketch.Add(keys);
    truth[k]++;
  }
  size_t exact = 0;
  for (auto [k, n] : truth) {
    ASSERT_GE(sketch.Estimate(k), n) << "key " << k;
    exact += sketch.Estimate(k) == n;
  }
  EXPECT_GT(exact, truth.size() * 9 / 10);
  std::vector<Key> extremes{0, ~Key{0}};
  sketch.Add(extremes);
  EXPECT_GE(sketch.Estimate(~Key{0}), 1u);
}

TEST(FrequencySketchTest, HotKeysOutrankColdOnesAndAgingForgets) {
  FrequencySketch sketch(64);
  std::vector<Key> hot(200, 42), cold{7};
  sketch.Add(hot);
  sketch.Add(cold);
  EXPECT_GT(sketch.Estimate(42), sketch.Estimate(7));
  // 10 x width increments of other keys age the counters: 42's count halves.
  uint32_t before = sketch.Estimate(42);
  std::vector<Key> others;
  for (Key k = 1000; k < 1000 + 10 * 64; ++k) others.push_back(k);
  sketch.Add(others);
  EXPECT_LT(sketch.Estimate(42), before);
}

}  // namespace
}  // namespace strata::engine
