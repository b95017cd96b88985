// Gradients that hold a NaN or an infinity: counted in
// StoreStats::nonfinite_grads and applied, or, with
// TableOptions::refuse_nonfinite_grads, refused whole (InvalidArgument naming
// the table and the first such key, no row changed). Both runners: the GPU
// combinations scan device memory with a kernel (and skip without a GPU).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "strata/store.h"
#include "tests/engine/store_test_util.h"

namespace strata {
namespace {

using testing::KeyRange;
using testing::SgdTables;

constexpr uint32_t kDim = 3;
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

class StoreGradientsTest : public testing::StoreFixture {
 protected:
  // Every key's row, pulled.
  std::vector<float> PullAll(Store& store, WorkerId w, const std::vector<Key>& keys) {
    std::vector<float> out(keys.size() * kDim);
    EXPECT_TRUE(Pull(store, w, 0, keys, out.data()).ok());
    return out;
  }
};

TEST_P(StoreGradientsTest, NonFiniteGradientsAreCountedAndApplied) {
  auto store = Open(Options(64, 128), SgdTables(1, kDim));
  ASSERT_NE(store, nullptr);
  const WorkerId w = *store->RegisterWorker();
  const std::vector<Key> keys = KeyRange(10, 6);
  std::vector<float> grads(keys.size() * kDim, 1.0f);
  grads[1 * kDim + 2] = kNan;
  grads[4 * kDim + 0] = -kInf;
  ASSERT_TRUE(Push(*store, w, 0, keys, grads.data()).ok());
  EXPECT_EQ(store->Stats().nonfinite_grads, 2u);
  const std::vector<float> rows = PullAll(*store, w, keys);
  EXPECT_TRUE(std::isnan(rows[1 * kDim + 2]));
  EXPECT_TRUE(std::isinf(rows[4 * kDim + 0]));
  EXPECT_TRUE(std::isfinite(rows[0]));
  EXPECT_NE(store->Stats().ToString().find("non-finite 2"), std::string::npos)
      << store->Stats().ToString();
}

TEST_P(StoreGradientsTest, RefusedNonFiniteGradientsChangeNothing) {
  auto tables = SgdTables(1, kDim);
  tables[0].refuse_nonfinite_grads = true;
  auto store = Open(Options(64, 128), tables);
  ASSERT_NE(store, nullptr);
  const WorkerId w = *store->RegisterWorker();
  // 300 keys: more than T0 holds, so a Push of them all goes in chunks.
  for (size_t n : {size_t{8}, size_t{300}}) {
    const std::vector<Key> keys = KeyRange(1000, n);
    const std::vector<float> before = PullAll(*store, w, keys);
    std::vector<float> grads(keys.size() * kDim, 1.0f);
    const size_t bad = n / 2;
    grads[bad * kDim + 1] = kInf;
    grads[(n - 1) * kDim] = kNan;
    const uint64_t counted = store->Stats().nonfinite_grads;
    Status s = Push(*store, w, 0, keys, grads.data());
    ASSERT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_NE(s.message().find("table 't0'"), std::string::npos) << s.ToString();
    EXPECT_NE(s.message().find("key " + std::to_string(keys[bad]) + " "), std::string::npos)
        << s.ToString();
    EXPECT_NE(s.message().find("nothing applied"), std::string::npos) << s.ToString();
    EXPECT_EQ(store->Stats().nonfinite_grads, counted + 2);
    EXPECT_EQ(PullAll(*store, w, keys), before) << n << " keys";

    // Finite gradients go through.
    grads[bad * kDim + 1] = 1.0f;
    grads[(n - 1) * kDim] = 1.0f;
    ASSERT_TRUE(Push(*store, w, 0, keys, grads.data()).ok());
    const std::vector<float> after = PullAll(*store, w, keys);
    for (size_t i = 0; i < after.size(); ++i) {
      ASSERT_FLOAT_EQ(after[i], before[i] - 0.5f) << n << " keys, float " << i;  // SGD, rate 0.5
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, StoreGradientsTest, testing::StoreCombinations(),
                         testing::StoreCombinationName);

}  // namespace
}  // namespace strata
