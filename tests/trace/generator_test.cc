// strata-test-labels: unit
#include "trace/generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "tests/trace/test_util.h"
#include "tests/util/scratch_dir.h"
#include "trace/limits.h"
#include "trace/zipf.h"

namespace strata::trace {
namespace {

using strata::testing::ScratchDir;
using testing::ReadBytes;

GenOptions Small() {
  GenOptions o;
  o.cardinalities = {1000, 50, 3};
  o.exponents = {1.1, 1.1, 0.0};
  o.hotness = {1, 2, 1};
  o.batch_size = 64;
  o.batches = 20;
  o.workers = 3;
  return o;
}

TEST(ZipfSamplerTest, FrequenciesFollowThePowerLaw) {
  for (double s : {0.0, 0.8, 1.0, 1.1, 1.45}) {
    const uint64_t n = 50;
    ZipfSampler zipf(n, s);
    SplitMix64 rng(3);
    std::vector<uint64_t> count(n + 1, 0);
    const int draws = 200000;
    for (int i = 0; i < draws; ++i) {
      const uint64_t k = zipf.Sample(rng);
      ASSERT_GE(k, 1u);
      ASSERT_LE(k, n);
      count[k]++;
    }
    double norm = 0;
    for (uint64_t k = 1; k <= n; ++k) norm += std::pow(static_cast<double>(k), -s);
    for (uint64_t k : {1, 2, 5, 20}) {
      const double want = draws * std::pow(static_cast<double>(k), -s) / norm;
      EXPECT_NEAR(static_cast<double>(count[k]), want, 5 * std::sqrt(want) + 1)
          << "exponent " << s << " rank " << k;
    }
  }
}

TEST(ZipfSamplerTest, HugeKeySpaceNeedsNoTable) {
  ZipfSampler zipf(40'000'000, 1.1);
  SplitMix64 rng(1);
  uint64_t max = 0;
  for (int i = 0; i < 10000; ++i) max = std::max(max, zipf.Sample(rng));
  EXPECT_LE(max, 40'000'000u);
  EXPECT_GT(max, 1000u);
}

TEST(GeneratorTest, SameSeedSameBytesOtherSeedOtherBytes) {
  ScratchDir dir;
  GenOptions o = Small();
  ASSERT_TRUE(Generate(o, dir.File("a")).ok());
  ASSERT_TRUE(Generate(o, dir.File("b")).ok());
  o.seed = 2;
  ASSERT_TRUE(Generate(o, dir.File("c")).ok());
  EXPECT_EQ(ReadBytes(dir.File("a")), ReadBytes(dir.File("b")));
  EXPECT_NE(ReadBytes(dir.File("a")), ReadBytes(dir.File("c")));
}

TEST(GeneratorTest, ShapeWorkersClocksAndKeySpaces) {
  ScratchDir dir;
  GenOptions o = Small();
  auto totals = Generate(o, dir.File("t"));
  ASSERT_TRUE(totals.ok()) << totals.status().ToString();
  EXPECT_EQ(totals->batches, 20u);
  EXPECT_EQ(totals->keys, 20u * 64 * (1 + 2 + 1));
  std::vector<std::set<Key>> unique(3);
  uint64_t b = 0;
  auto s = ForEachBatch(dir.File("t"), [&](const TraceBatch& batch) {
    EXPECT_EQ(batch.worker, b % 3);
    EXPECT_EQ(batch.clock, static_cast<Clock>(b / 3));
    EXPECT_EQ(batch.tables.size(), 3u);
    EXPECT_EQ(batch.tables[1].keys.size(), 128u);  // hotness 2
    for (const auto& t : batch.tables) unique[t.table].insert(t.keys.begin(), t.keys.end());
    ++b;
    return Status::Ok();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_LE(unique[0].size(), 1000u);
  EXPECT_LE(unique[1].size(), 50u);
  EXPECT_EQ(unique[2].size(), 3u);  // uniform over 3 keys: all appear
}

TEST(GeneratorTest, DriftMovesTheHotSet) {
  ScratchDir dir;
  GenOptions o;
  o.cardinalities = {100000};
  o.exponents = {1.2};
  o.hotness = {1};
  o.batch_size = 512;
  o.batches = 40;
  o.drift = 1000;  // the hot set slides 1000 ids a batch
  ASSERT_TRUE(Generate(o, dir.File("t")).ok());
  std::map<Key, int> first_batch, last_batch;
  uint64_t b = 0;
  ASSERT_TRUE(ForEachBatch(dir.File("t"), [&](const TraceBatch& batch) {
                if (b == 0)
                  for (Key k : batch.tables[0].keys) first_batch[k]++;
                if (b == 39)
                  for (Key k : batch.tables[0].keys) last_batch[k]++;
                ++b;
                return Status::Ok();
              }).ok());
  auto top = [](const std::map<Key, int>& m) {
    return std::max_element(m.begin(), m.end(),
                            [](auto& a, auto& c) { return a.second < c.second; })
        ->first;
  };
  EXPECT_NE(top(first_batch), top(last_batch));
  EXPECT_EQ(last_batch.count(top(first_batch)), 0u);  // 39000 ids away: gone
}

TEST(GeneratorTest, PresetsAndValidation) {
  auto kaggle = PresetOptions("criteo-kaggle");
  ASSERT_TRUE(kaggle.ok());
  ASSERT_EQ(kaggle->cardinalities.size(), 26u);
  uint64_t sum = 0;
  for (uint64_t c : kaggle->cardinalities) sum += c;
  EXPECT_EQ(sum, 33762577u);  // 33.76M keys (shared/data/README.md)
  auto tb = PresetOptions("criteo-1tb");
  ASSERT_TRUE(tb.ok());
  sum = 0;
  for (uint64_t c : tb->cardinalities) sum += c;
  EXPECT_EQ(sum, 187767399u);  // 187.8M keys
  EXPECT_EQ(kaggle->exponents[5], 1.1);
  EXPECT_EQ(MlperfHotness().size(), 26u);
  EXPECT_TRUE(PresetOptions("nope").status().IsInvalidArgument());
  GenOptions o = *kaggle;
  o.scale = 0.001;
  EXPECT_EQ(ScaledKeySpace(o, 2), 10131u);
  EXPECT_EQ(ScaledKeySpace(o, 8), 1u);  // never below one key
  o.hotness.pop_back();
  EXPECT_TRUE(ValidateGenOptions(o).IsInvalidArgument());
  ScratchDir dir;
  EXPECT_TRUE(Generate(o, dir.File("t")).status().IsInvalidArgument());
  EXPECT_FALSE(std::filesystem::exists(dir.File("t")));
}

// A "-1" read as 2^64 - 1 (batches: a trace that fills the disk; key space:
// a cast of a double beyond 2^64) is refused before anything is written.
TEST(GeneratorTest, HugeBatchCountsAndKeySpacesAreRefused) {
  GenOptions o;
  o.cardinalities = {100};
  o.exponents = {1.1};
  o.hotness = {1};
  ASSERT_TRUE(ValidateGenOptions(o).ok());
  o.batches = UINT64_MAX;
  EXPECT_TRUE(ValidateGenOptions(o).IsInvalidArgument());
  o.batches = kGenBatchesMax + 1;
  EXPECT_TRUE(ValidateGenOptions(o).IsInvalidArgument());
  o.batches = 10;
  o.cardinalities = {UINT64_MAX};
  o.scale = 1e6;
  EXPECT_TRUE(ValidateGenOptions(o).IsInvalidArgument());
  o.cardinalities = {uint64_t{1} << 62};
  o.scale = 1;
  EXPECT_TRUE(ValidateGenOptions(o).ok());
  o.scale = 2;
  EXPECT_TRUE(ValidateGenOptions(o).IsInvalidArgument());
  ScratchDir dir;
  EXPECT_TRUE(Generate(o, dir.File("t")).status().IsInvalidArgument());
  EXPECT_FALSE(std::filesystem::exists(dir.File("t")));
}

}  // namespace
}  // namespace strata::trace
