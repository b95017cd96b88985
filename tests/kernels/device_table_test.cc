// strata-test-labels: unit gpu
// DeviceTable on every runner: the host runner always, the GPU when one is
// visible (skipped with the reason otherwise).
#include "kernels/device_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <unordered_map>

#include "tests/kernels/table_harness.h"

namespace strata::kernels {
namespace {

using testing::ExportedRow;
using testing::Harness;
using testing::MakeTable;

template <class R>
class DeviceTableTest : public ::testing::Test {
 protected:
  static constexpr Runner kRunner = R::kRunner;
  void SetUp() override {
    if (kRunner == Runner::kGpu && VisibleGpuCount() == 0) {
      GTEST_SKIP() << "no CUDA device visible" << CudaBuildInfo();
    }
  }
  DeviceTableOptions Options(uint64_t capacity, uint32_t dim, Optimizer kind = Optimizer::kSgd) {
    DeviceTableOptions o;
    o.capacity_rows = capacity;
    o.dim = dim;
    o.optimizer.kind = kind;
    o.optimizer.learning_rate = 0.5f;
    o.initializer.seed = 42;
    o.batch_keys_max = 1 << 16;
    return o;
  }
  std::vector<float> RandomRows(std::mt19937_64& rng, size_t n, uint32_t row_floats) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> rows(n * row_floats);
    for (float& x : rows) x = u(rng);
    return rows;
  }
};

using Runners = ::testing::Types<testing::HostRunner, testing::GpuRunner>;
class RunnerNames {
 public:
  template <class T>
  static std::string GetName(int) {
    return T::kRunner == Runner::kGpu ? "Gpu" : "Host";
  }
};
TYPED_TEST_SUITE(DeviceTableTest, Runners, RunnerNames);

TYPED_TEST(DeviceTableTest, RoundTripOverwriteAndMisses) {
  auto t = MakeTable(this->kRunner, this->Options(1000, 8));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  std::mt19937_64 rng(1);
  std::vector<Key> keys(500);
  for (Key& k : keys) k = rng();
  std::vector<float> rows = this->RandomRows(rng, keys.size(), t->row_floats());
  ASSERT_TRUE(h.InsertOrAssign(keys, rows, {}, {}).ok());
  EXPECT_EQ(t->Size(), 500u);
  std::vector<float> values;
  std::vector<uint8_t> found;
  ASSERT_TRUE(h.Find(keys, &values, &found).ok());
  EXPECT_EQ(values, rows);  // SGD: row == embedding
  EXPECT_EQ(std::count(found.begin(), found.end(), 1), 500);
  // Overwrite half, miss on fresh keys.
  std::vector<Key> half(keys.begin(), keys.begin() + 250);
  std::vector<float> rows2 = this->RandomRows(rng, half.size(), t->row_floats());
  ASSERT_TRUE(h.InsertOrAssign(half, rows2, {}, {}).ok());
  EXPECT_EQ(t->Size(), 500u);
  std::vector<Key> probe = {keys[0], keys[300], rng(), rng()};
  ASSERT_TRUE(h.Find(probe, &values, &found).ok());
  EXPECT_EQ(found, (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_TRUE(std::equal(values.begin(), values.begin() + 8, rows2.begin()));
  EXPECT_TRUE(std::equal(values.begin() + 8, values.begin() + 16, rows.begin() + 300 * 8));
}

TYPED_TEST(DeviceTableTest, ExtremeKeysAreOrdinaryKeys) {
  auto t = MakeTable(this->kRunner, this->Options(64, 4, Optimizer::kAdagrad));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  const std::vector<Key> keys = {0, ~Key{0}, 1, ~Key{0} - 1};
  std::vector<float> values;
  std::vector<uint8_t> inserted;
  ASSERT_TRUE(h.FindOrInsert(keys, &values, &inserted, 7).ok());
  EXPECT_EQ(inserted, std::vector<uint8_t>(4, kInsertCreated));
  EXPECT_EQ(t->Size(), 4u);
  std::vector<float> expect(t->row_floats());
  InitRow(t->options().initializer, t->options().optimizer, ~Key{0}, 4, expect.data());
  EXPECT_TRUE(std::equal(values.begin() + 4, values.begin() + 8, expect.begin()));
  ASSERT_TRUE(h.Erase({0}).ok());
  std::vector<uint8_t> found;
  ASSERT_TRUE(h.Find(keys, &values, &found).ok());
  EXPECT_EQ(found, (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(t->Size(), 3u);
}

TYPED_TEST(DeviceTableTest, DuplicatesInFindOrInsertShareOneRow) {
  auto t = MakeTable(this->kRunner, this->Options(1000, 8));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  std::vector<Key> keys(20000);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = 1000 + i % 10;
  std::vector<float> values;
  std::vector<uint8_t> inserted;
  ASSERT_TRUE(h.FindOrInsert(keys, &values, &inserted, 0).ok());
  EXPECT_EQ(t->Size(), 10u);
  EXPECT_EQ(std::count(inserted.begin(), inserted.end(), kInsertCreated), 10);
  std::vector<float> expect(t->row_floats());
  for (size_t i = 0; i < keys.size(); ++i) {
    InitRow(t->options().initializer, t->options().optimizer, keys[i], 8, expect.data());
    ASSERT_TRUE(std::equal(expect.begin(), expect.begin() + 8, values.begin() + i * 8)) << i;
  }
}

TYPED_TEST(DeviceTableTest, DuplicatesInInsertOrAssignLastWins) {
  auto t = MakeTable(this->kRunner, this->Options(100, 2));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  std::vector<Key> keys;
  std::vector<float> rows;
  for (int i = 0; i < 10000; ++i) {
    keys.push_back(i % 3);
    rows.push_back(static_cast<float>(i));
    rows.push_back(-static_cast<float>(i));
  }
  ASSERT_TRUE(h.InsertOrAssign(keys, rows, {}, {}).ok());
  std::vector<float> values;
  std::vector<uint8_t> found;
  ASSERT_TRUE(h.Find({0, 1, 2}, &values, &found).ok());
  EXPECT_EQ(values, (std::vector<float>{9999, -9999, 9997, -9997, 9998, -9998}));
  EXPECT_EQ(t->Size(), 3u);
}

TYPED_TEST(DeviceTableTest, PushSumsDuplicatesAndMarksDirty) {
  auto t = MakeTable(this->kRunner, this->Options(100, 2));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  ASSERT_TRUE(h.InsertOrAssign({5, 6}, {1, 2, 3, 4}, {}, {0, 0}).ok());
  // key 5 three times, key 6 once; lr 0.5.
  ASSERT_TRUE(h.Push({5, 6, 5, 5}, {1, 1, 2, 2, 1, 0, 0.5f, 0.25f}).ok());
  auto rows = h.ExportAll();
  EXPECT_EQ(rows[5].row, (std::vector<float>{1 - 0.5f * 2.5f, 2 - 0.5f * 1.25f}));
  EXPECT_EQ(rows[6].row, (std::vector<float>{3 - 0.5f * 2, 4 - 0.5f * 2}));
  EXPECT_EQ(rows[5].dirty, 1);
  EXPECT_EQ(rows[6].dirty, 1);
}

// One pass gathers the resident keys' embeddings (repeats included), sets
// their next uses, reports the rest, and leaves the rows of missing keys
// untouched; a second pass scatters to given rows with one next use for all.
TYPED_TEST(DeviceTableTest, FindTouchGathersRefreshesAndReportsMisses) {
  auto t = MakeTable(this->kRunner, this->Options(100, 2));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  ASSERT_TRUE(h.InsertOrAssign({1, 2, 3}, {1, 10, 2, 20, 3, 30}, {100, 200, 300}, {}).ok());
  std::vector<float> out(5 * 2, -7.0f);
  std::vector<uint8_t> found;
  uint64_t missing = 0;
  ASSERT_TRUE(h.FindTouch({2, 99, 1, 2, 98}, {}, {5, 6, 7, 5, 8}, 0, &out, &found, &missing).ok());
  EXPECT_EQ(missing, 2u);
  EXPECT_EQ(found, (std::vector<uint8_t>{1, 0, 1, 1, 0}));
  EXPECT_EQ(out, (std::vector<float>{2, 20, -7, -7, 1, 10, 2, 20, -7, -7}));
  auto rows = h.ExportAll();
  EXPECT_EQ(rows[1].next_use, 7);
  EXPECT_EQ(rows[2].next_use, 5);
  EXPECT_EQ(rows[3].next_use, 300);  // not in the batch
  EXPECT_EQ(rows[1].dirty, 0);       // a read does not dirty

  std::vector<float> scattered(4 * 2, 0.0f);
  ASSERT_TRUE(h.FindTouch({3, 1}, {2, 0}, {}, 42, &scattered, &found, &missing).ok());
  EXPECT_EQ(missing, 0u);
  EXPECT_EQ(scattered, (std::vector<float>{1, 10, 0, 0, 3, 30, 0, 0}));
  rows = h.ExportAll();
  EXPECT_EQ(rows[1].next_use, 42);
  EXPECT_EQ(rows[3].next_use, 42);
  EXPECT_EQ(rows[2].next_use, 5);
}

// Push takes a step per distinct key with its gradients summed, whether a
// key occurs once or many times in the batch: the same rows as one step per
// key of the summed gradient. Gradients are small powers of two, so every
// summation order gives the same sums.
TYPED_TEST(DeviceTableTest, PushWithManyRepeatsMatchesOneStepPerKey) {
  auto o = this->Options(4096, 8, Optimizer::kAdagrad);
  auto t = MakeTable(this->kRunner, o);
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  std::mt19937_64 rng(5);
  const uint32_t rf = t->row_floats();
  std::vector<Key> resident(1000);
  std::iota(resident.begin(), resident.end(), 5000);
  std::vector<float> init = this->RandomRows(rng, resident.size(), rf);
  for (size_t i = 0; i < resident.size(); ++i) {
    for (uint32_t d = 8; d < rf; ++d) init[i * rf + d] = 0.5f;  // accumulators
  }
  ASSERT_TRUE(h.InsertOrAssign(resident, init, {}, {}).ok());
  // Half the batch on 8 hot keys, the rest spread: singles and repeats.
  std::vector<Key> keys;
  std::vector<float> grads;
  std::map<Key, std::vector<float>> sums;
  for (int i = 0; i < 3000; ++i) {
    const Key k = i % 2 == 0 ? resident[rng() % 8] : resident[rng() % resident.size()];
    keys.push_back(k);
    auto& sum = sums[k];
    sum.resize(8, 0.0f);
    for (uint32_t d = 0; d < 8; ++d) {
      const float g = std::ldexp(1.0f, -static_cast<int>(rng() % 6)) * (rng() % 2 ? 1 : -1);
      grads.push_back(g);
      sum[d] += g;
    }
  }
  ASSERT_TRUE(h.Push(keys, grads).ok());
  auto rows = h.ExportAll();
  for (size_t i = 0; i < resident.size(); ++i) {
    std::vector<float> want(init.begin() + i * rf, init.begin() + (i + 1) * rf);
    auto it = sums.find(resident[i]);
    if (it != sums.end()) ApplyOptimizer(o.optimizer, 8, want.data(), it->second.data());
    EXPECT_EQ(rows[resident[i]].row, want) << "key " << resident[i];
    EXPECT_EQ(rows[resident[i]].dirty, it != sums.end() ? 1 : 0) << "key " << resident[i];
  }
  // The scratch is clear again: a second Push of one key steps it once.
  std::vector<float> before = rows[resident[0]].row;
  ASSERT_TRUE(h.Push({resident[0]}, std::vector<float>(8, 1.0f)).ok());
  std::vector<float> one(8, 1.0f);
  ApplyOptimizer(o.optimizer, 8, before.data(), one.data());
  EXPECT_EQ(h.ExportAll()[resident[0]].row, before);
}

TYPED_TEST(DeviceTableTest, PushWithMissingKeyAppliesNothing) {
  auto t = MakeTable(this->kRunner, this->Options(100, 2));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  ASSERT_TRUE(h.InsertOrAssign({5, 6}, {1, 2, 3, 4}, {}, {}).ok());
  Status s = h.Push({5, 77, 6, 78}, {1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("key 77"), std::string::npos) << s.message();
  auto rows = h.ExportAll();
  EXPECT_EQ(rows[5].row, (std::vector<float>{1, 2}));
  EXPECT_EQ(rows[6].row, (std::vector<float>{3, 4}));
  EXPECT_EQ(rows[5].dirty, 0);
}

TYPED_TEST(DeviceTableTest, FullTableIsResourceExhaustedAndLosesNothing) {
  auto t = MakeTable(this->kRunner, this->Options(100, 4));  // 8 buckets, 128 slots
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->slots(), 128u);
  Harness h(t.get());
  std::vector<Key> keys(200);
  std::iota(keys.begin(), keys.end(), Key{1} << 40);
  std::vector<float> values;
  std::vector<uint8_t> inserted;
  Status s = h.FindOrInsert(keys, &values, &inserted, 0);
  ASSERT_TRUE(s.IsResourceExhausted()) << s.ToString();
  EXPECT_NE(s.message().find("72 of 200"), std::string::npos) << s.message();
  EXPECT_EQ(t->Size(), 128u);
  EXPECT_EQ(std::count(inserted.begin(), inserted.end(), kInsertNoRoom), 72);
  std::vector<uint8_t> found;
  ASSERT_TRUE(h.Find(keys, &values, &found).ok());
  std::vector<float> expect(t->row_floats());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(found[i], inserted[i] == kInsertCreated) << i;
    if (!found[i]) continue;
    InitRow(t->options().initializer, t->options().optimizer, keys[i], 4, expect.data());
    EXPECT_TRUE(std::equal(expect.begin(), expect.begin() + 4, values.begin() + i * 4)) << i;
  }
  // Assigning a new key fails; assigning a resident one still works.
  Key resident = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (found[i]) resident = keys[i];
  }
  s = h.InsertOrAssign({resident, 3}, {9, 9, 9, 9, 8, 8, 8, 8}, {}, {});
  EXPECT_TRUE(s.IsResourceExhausted()) << s.ToString();
  ASSERT_TRUE(h.Find({resident, 3}, &values, &found).ok());
  EXPECT_EQ(found, (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(values[0], 9.0f);
  // After erasing, the room is usable again.
  ASSERT_TRUE(h.Erase({resident}).ok());
  ASSERT_TRUE(h.InsertOrAssign({3}, {8, 8, 8, 8}, {}, {}).ok());
  EXPECT_EQ(t->Size(), 128u);
}

TYPED_TEST(DeviceTableTest, HoldsCapacityRowsOfRandomKeys) {
  auto o = this->Options(200000, 1);
  o.batch_keys_max = 1 << 18;
  auto t = MakeTable(this->kRunner, o);
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  std::mt19937_64 rng(7);
  std::vector<Key> keys(200000);
  for (Key& k : keys) k = rng();
  std::vector<uint8_t> inserted;
  ASSERT_TRUE(
      h.FindOrInsert(std::vector<Key>(keys.begin(), keys.begin() + 60000), nullptr, &inserted, 0)
          .ok());
  ASSERT_TRUE(h.FindOrInsert(std::vector<Key>(keys.begin() + 60000, keys.begin() + 120000), nullptr,
                             &inserted, 0)
                  .ok());
  ASSERT_TRUE(
      h.FindOrInsert(std::vector<Key>(keys.begin() + 120000, keys.end()), nullptr, &inserted, 0)
          .ok());
  EXPECT_EQ(t->Size(), 200000u);
  EXPECT_NEAR(t->LoadFactor(), 0.85, 0.01);
}

TYPED_TEST(DeviceTableTest, HoldsNinetyPercentOfSlots) {
  auto o = this->Options(1 << 20, 1);
  o.batch_keys_max = 1 << 21;
  auto t = MakeTable(this->kRunner, o);
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  std::mt19937_64 rng(8);
  std::vector<Key> keys(static_cast<size_t>(0.9 * static_cast<double>(t->slots())));
  for (Key& k : keys) k = rng();
  std::vector<uint8_t> inserted;
  Status s = h.FindOrInsert(keys, nullptr, &inserted, 0);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NEAR(t->LoadFactor(), 0.9, 0.001);
  std::vector<float> values;
  ASSERT_TRUE(h.Find(keys, &values, &inserted).ok());
  EXPECT_EQ(std::count(inserted.begin(), inserted.end(), 1), static_cast<long>(keys.size()));
}

TYPED_TEST(DeviceTableTest, EraseThenReinsertRecreatesTheSameRow) {
  auto t = MakeTable(this->kRunner, this->Options(1000, 4, Optimizer::kAdam));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  std::vector<Key> keys(800);
  std::iota(keys.begin(), keys.end(), 0);
  std::vector<float> first, again;
  std::vector<uint8_t> inserted;
  ASSERT_TRUE(h.FindOrInsert(keys, &first, &inserted, 0).ok());
  std::vector<Key> odd;
  for (Key k : keys) {
    if (k % 2) odd.push_back(k);
  }
  ASSERT_TRUE(h.Erase(odd).ok());
  ASSERT_TRUE(h.Erase(odd).ok());  // erasing missing keys is a no-op
  EXPECT_EQ(t->Size(), 400u);
  ASSERT_TRUE(h.FindOrInsert(keys, &again, &inserted, 0).ok());
  EXPECT_EQ(first, again);
  for (Key k : keys) EXPECT_EQ(inserted[k], k % 2 ? kInsertCreated : kInsertFound);
  EXPECT_EQ(t->Size(), 800u);
}

TYPED_TEST(DeviceTableTest, EvictionTakesLargestNextUseAndNeverPinned) {
  auto t = MakeTable(this->kRunner, this->Options(2000, 2));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  const int n = 1000;
  std::vector<Key> keys(n);
  std::vector<int64_t> next_use(n);
  std::vector<uint8_t> dirty(n);
  std::vector<float> rows(2 * n);
  for (int i = 0; i < n; ++i) {
    keys[i] = 7919ULL * i + 3;
    next_use[i] = (i * 37) % n;  // a permutation of 0..n-1
    dirty[i] = i % 3 == 0;
    rows[2 * i] = static_cast<float>(i);
    rows[2 * i + 1] = static_cast<float>(-i);
  }
  ASSERT_TRUE(h.InsertOrAssign(keys, rows, next_use, dirty).ok());
  // Pin the 100 rows with the largest next use; pin one twice.
  std::vector<Key> pinned;
  for (int i = 0; i < n; ++i) {
    if (next_use[i] >= n - 100) pinned.push_back(keys[i]);
  }
  std::vector<uint8_t> found;
  ASSERT_TRUE(h.Pin(pinned, &found).ok());
  EXPECT_EQ(std::count(found.begin(), found.end(), 1), 100);
  ASSERT_TRUE(h.Pin({pinned[0]}).ok());
  std::vector<Key> out_keys;
  std::vector<ExportedRow> out_rows;
  ASSERT_TRUE(h.Evict(50, &out_keys, &out_rows).ok());
  ASSERT_EQ(out_keys.size(), 50u);
  std::vector<int64_t> got;
  for (size_t j = 0; j < out_keys.size(); ++j) {
    const int i = static_cast<int>((out_keys[j] - 3) / 7919);
    ASSERT_EQ(keys[i], out_keys[j]);
    EXPECT_EQ(out_rows[j].next_use, next_use[i]);
    EXPECT_EQ(out_rows[j].dirty, dirty[i]);
    EXPECT_EQ(out_rows[j].row, (std::vector<float>{rows[2 * i], rows[2 * i + 1]}));
    got.push_back(out_rows[j].next_use);
  }
  if (this->kRunner == Runner::kHost) {
    EXPECT_TRUE(std::is_sorted(got.rbegin(), got.rend()));
  }
  std::sort(got.begin(), got.end());
  for (int j = 0; j < 50; ++j) EXPECT_EQ(got[j], n - 150 + j);  // 850..899
  EXPECT_EQ(t->Size(), 950u);
  ASSERT_TRUE(h.Find(out_keys, &rows, &found).ok());
  EXPECT_EQ(std::count(found.begin(), found.end(), 1), 0);
  // Unpin once: all but pinned[0] become evictable; ask for more than exist.
  ASSERT_TRUE(h.Unpin(pinned).ok());
  ASSERT_TRUE(h.Evict(5000, &out_keys, &out_rows).ok());
  EXPECT_EQ(out_keys.size(), 949u);
  EXPECT_EQ(std::set<Key>(out_keys.begin(), out_keys.end()).size(), 949u);
  EXPECT_EQ(std::count(out_keys.begin(), out_keys.end(), pinned[0]), 0);
  EXPECT_EQ(t->Size(), 1u);
  ASSERT_TRUE(h.Unpin({pinned[0], pinned[0], pinned[0]}).ok());  // never below zero
  ASSERT_TRUE(h.Evict(10, &out_keys, &out_rows).ok());
  EXPECT_EQ(out_keys, std::vector<Key>{pinned[0]});
  EXPECT_EQ(t->Size(), 0u);
}

// LargestNextUses names what EvictCandidates would take, largest first,
// and takes nothing; pinned rows and ties at the threshold count as there.
TYPED_TEST(DeviceTableTest, LargestNextUsesMatchWhatEvictionTakes) {
  auto t = MakeTable(this->kRunner, this->Options(2000, 1));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  const int n = 1000;
  std::vector<Key> keys(n);
  std::vector<int64_t> next_use(n);
  std::vector<float> rows(n);
  for (int i = 0; i < n; ++i) {
    keys[i] = 104729ULL * i + 11;
    // Values 0..499, each twice, one negative, one near the top of int64.
    next_use[i] = i == 0 ? -5 : i == 1 ? (int64_t{1} << 62) + 7 : (i * 37) % n / 2;
  }
  ASSERT_TRUE(h.InsertOrAssign(keys, rows, next_use, {}).ok());
  std::vector<Key> pinned;
  for (int i = 2; i < n; ++i) {
    if (next_use[i] >= 490) pinned.push_back(keys[i]);  // 20 rows
  }
  ASSERT_TRUE(h.Pin(pinned).ok());
  std::vector<int64_t> model;
  for (int i = 0; i < n; ++i) {
    if (i < 2 || next_use[i] < 490) model.push_back(next_use[i]);
  }
  std::sort(model.rbegin(), model.rend());
  for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{37}, uint64_t{500}, uint64_t{5000}}) {
    std::vector<int64_t> got(k, 123456);
    uint64_t count = 0;
    ASSERT_TRUE(t->LargestNextUses(k, got.data(), &count).ok());
    const uint64_t want = std::min<uint64_t>(k, model.size());
    ASSERT_EQ(count, want) << k;
    got.resize(count);
    EXPECT_EQ(got, std::vector<int64_t>(model.begin(), model.begin() + want)) << k;
  }
  EXPECT_EQ(t->Size(), uint64_t(n));
  // Eviction takes exactly the named values.
  std::vector<Key> out_keys;
  std::vector<ExportedRow> out_rows;
  ASSERT_TRUE(h.Evict(37, &out_keys, &out_rows).ok());
  std::vector<int64_t> taken;
  for (const auto& r : out_rows) taken.push_back(r.next_use);
  std::sort(taken.rbegin(), taken.rend());
  EXPECT_EQ(taken, std::vector<int64_t>(model.begin(), model.begin() + 37));
  uint64_t count = 9;
  EXPECT_TRUE(t->LargestNextUses(0, nullptr, &count).ok());
  EXPECT_EQ(count, 0u);
  EXPECT_TRUE(t->LargestNextUses(1, nullptr, &count).IsInvalidArgument());
  EXPECT_TRUE(t->LargestNextUses(1, taken.data(), nullptr).IsInvalidArgument());
}

TYPED_TEST(DeviceTableTest, SetNextUseAndAssignKeepPins) {
  auto t = MakeTable(this->kRunner, this->Options(100, 1));
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  ASSERT_TRUE(h.InsertOrAssign({1, 2, 3}, {1, 2, 3}, {10, 20, 30}, {}).ok());
  ASSERT_TRUE(h.SetNextUse({1}, {100}).ok());
  ASSERT_TRUE(h.Pin({3}).ok());
  ASSERT_TRUE(h.InsertOrAssign({3}, {33}, {1000}, {1}).ok());  // keeps its pin
  std::vector<Key> out_keys;
  std::vector<ExportedRow> out_rows;
  ASSERT_TRUE(h.Evict(1, &out_keys, &out_rows).ok());
  EXPECT_EQ(out_keys, std::vector<Key>{1});
  ASSERT_TRUE(h.Evict(5, &out_keys, &out_rows).ok());
  EXPECT_EQ(out_keys, std::vector<Key>{2});
  auto rows = h.ExportAll();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[3].row, std::vector<float>{33});
  EXPECT_EQ(rows[3].next_use, 1000);
  EXPECT_EQ(rows[3].dirty, 1);
}

TYPED_TEST(DeviceTableTest, InitializerIndependentOfOrderAndCapacity) {
  for (Initializer kind : {Initializer::kUniform, Initializer::kNormal}) {
    auto o = this->Options(5000, 16, Optimizer::kAdagrad);
    o.initializer.kind = kind;
    auto a = MakeTable(this->kRunner, o);
    o.capacity_rows = 100000;
    auto b = MakeTable(this->kRunner, o);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    Harness ha(a.get()), hb(b.get());
    std::vector<Key> keys(3000);
    std::mt19937_64 rng(3);
    for (Key& k : keys) k = rng();
    std::vector<float> va, vb;
    std::vector<uint8_t> inserted;
    ASSERT_TRUE(ha.FindOrInsert(keys, nullptr, &inserted, 0).ok());
    std::vector<Key> shuffled = keys;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    for (size_t i = 0; i < shuffled.size(); i += 700) {
      std::vector<Key> part(shuffled.begin() + i,
                            shuffled.begin() + std::min(shuffled.size(), i + 700));
      ASSERT_TRUE(hb.FindOrInsert(part, nullptr, &inserted, 0).ok());
    }
    ASSERT_TRUE(ha.FindRows(keys, &va, &inserted).ok());
    ASSERT_TRUE(hb.FindRows(keys, &vb, &inserted).ok());
    EXPECT_EQ(va, vb);
    std::vector<float> expect(a->row_floats());
    InitRow(o.initializer, o.optimizer, keys[17], 16, expect.data());
    if (kind == Initializer::kUniform || this->kRunner == Runner::kHost) {
      EXPECT_TRUE(std::equal(expect.begin(), expect.end(), va.begin() + 17 * a->row_floats()));
    }
  }
}

TYPED_TEST(DeviceTableTest, ExportAllMatchesModelAfter100kRandomOps) {
  auto o = this->Options(6000, 4, Optimizer::kAdagrad);
  o.batch_keys_max = 1000;  // ExportAll in several chunks
  auto t = MakeTable(this->kRunner, o);
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  const uint32_t rf = t->row_floats();
  std::unordered_map<Key, ExportedRow> model;
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int> pick_op(0, 4);
  auto random_key = [&] {
    return rng() % 2500 + (rng() % 2 ? 0 : ~Key{0} - 2500);
  };  // <= 5000 keys
  uint64_t ops = 0;
  while (ops < 100000) {
    const int op = pick_op(rng);
    const size_t n = 1 + rng() % 200;
    std::vector<Key> keys(n);
    for (Key& k : keys) k = random_key();
    ops += n;
    if (op == 0) {  // FindOrInsert
      std::vector<float> values;
      std::vector<uint8_t> inserted;
      ASSERT_TRUE(h.FindOrInsert(keys, &values, &inserted, 5).ok());
      for (size_t i = 0; i < n; ++i) {
        if (!model.count(keys[i])) {
          ExportedRow& e = model[keys[i]];
          e.row.resize(rf);
          InitRow(o.initializer, o.optimizer, keys[i], o.dim, e.row.data());
          e.next_use = 5;
        }
        ASSERT_TRUE(std::equal(values.begin() + i * o.dim, values.begin() + (i + 1) * o.dim,
                               model[keys[i]].row.begin()))
            << "key " << keys[i] << " inserted " << int(inserted[i]) << " op# " << ops << " got "
            << values[i * o.dim] << " want " << model[keys[i]].row[0];
      }
    } else if (op == 1) {  // InsertOrAssign
      std::vector<float> rows = this->RandomRows(rng, n, rf);
      for (size_t i = 0; i < rows.size(); ++i) {
        if (i % rf >= o.dim) rows[i] = std::fabs(rows[i]);  // AdaGrad accumulators >= 0
      }
      std::vector<int64_t> nu(n);
      std::vector<uint8_t> dirty(n);
      for (size_t i = 0; i < n; ++i) {
        nu[i] = static_cast<int64_t>(rng() % 1000);
        dirty[i] = rng() % 2;
        ExportedRow& e = model[keys[i]];
        e.row.assign(rows.begin() + i * rf, rows.begin() + (i + 1) * rf);
        e.next_use = nu[i];
        e.dirty = dirty[i];
      }
      ASSERT_TRUE(h.InsertOrAssign(keys, rows, nu, dirty).ok());
    } else if (op == 2) {  // Erase
      ASSERT_TRUE(h.Erase(keys).ok());
      for (Key k : keys) model.erase(k);
    } else if (op == 3) {  // Push on resident keys (duplicates included)
      std::vector<Key> resident;
      for (Key k : keys) {
        if (model.count(k)) resident.push_back(k);
      }
      if (!resident.empty()) resident.push_back(resident.front());
      std::vector<float> grads = this->RandomRows(rng, resident.size(), o.dim);
      ASSERT_TRUE(h.Push(resident, grads).ok());
      std::map<Key, std::vector<float>> sums;
      for (size_t i = 0; i < resident.size(); ++i) {
        auto& s = sums[resident[i]];
        s.resize(o.dim, 0.0f);
        for (uint32_t d = 0; d < o.dim; ++d) s[d] = s[d] + grads[i * o.dim + d];
      }
      for (auto& [k, g] : sums) {
        ApplyOptimizer(o.optimizer, o.dim, model[k].row.data(), g.data());
        model[k].dirty = 1;
      }
    } else {  // Find
      std::vector<float> values;
      std::vector<uint8_t> found;
      ASSERT_TRUE(h.Find(keys, &values, &found).ok());
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(found[i], model.count(keys[i])) << keys[i];
    }
    ASSERT_EQ(t->Size(), model.size());
  }
  auto exported = h.ExportAll();
  ASSERT_EQ(exported.size(), model.size());
  for (auto& [k, e] : model) {
    ASSERT_TRUE(exported.count(k)) << k;
    const ExportedRow& x = exported[k];
    // Sums of two or more gradients may round differently on the GPU.
    if (this->kRunner == Runner::kHost) {
      EXPECT_EQ(x.row, e.row) << k;
    } else {
      for (uint32_t d = 0; d < rf; ++d) EXPECT_NEAR(x.row[d], e.row[d], 1e-5f) << k;
    }
    EXPECT_EQ(x.next_use, e.next_use) << k;
    EXPECT_EQ(x.dirty, e.dirty) << k;
  }
}

TYPED_TEST(DeviceTableTest, BadArgumentsChangeNothing) {
  DeviceTableOptions bad = this->Options(0, 4);
  EXPECT_TRUE(DeviceTable::Create(bad, this->kRunner).status().IsInvalidArgument());
  bad = this->Options(10, 0);
  EXPECT_TRUE(DeviceTable::Create(bad, this->kRunner).status().IsInvalidArgument());
  auto o = this->Options(100, 2);
  o.batch_keys_max = 4;
  auto t = MakeTable(this->kRunner, o);
  ASSERT_NE(t, nullptr);
  Harness h(t.get());
  Status s = h.InsertOrAssign({1, 2, 3, 4, 5}, std::vector<float>(10, 1.0f), {}, {});
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_EQ(t->Size(), 0u);
  EXPECT_TRUE(t->Find(nullptr, 1, nullptr, nullptr).IsInvalidArgument());
  EXPECT_TRUE(t->Find(nullptr, 0, nullptr, nullptr).ok());
  TouchBatch touch;  // no keys, no out
  touch.n = 1;
  uint64_t missing = 0;
  EXPECT_TRUE(t->FindTouch(touch, &missing, nullptr).IsInvalidArgument());
  EXPECT_TRUE(t->FindTouch(TouchBatch{}, nullptr, nullptr).IsInvalidArgument());
  EXPECT_TRUE(t->EvictCandidates(1, nullptr).IsInvalidArgument());
}

}  // namespace
}  // namespace strata::kernels
