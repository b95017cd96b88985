// strata-test-labels: integration gpu
// strata-test-timeout: 300
// Optimizer state travels with its row: an AdaGrad and an Adam table on tiny
// tiers, so rows (embedding and state) move through T0, T1 and T2 between
// pushes, on each T0 runner and SSD backend. Every pull, the final scan and
// the pushes after a checkpoint and reopen match a model of the optimizers
// written from their definitions, in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <unordered_map>

#include "strata/store.h"
#include "tests/engine/store_test_util.h"

namespace strata {
namespace {

constexpr uint32_t kDim = 8;
constexpr double kTolerance = 1e-5;  // float rows against the double model

class StoreOptimizerTest : public testing::StoreFixture {};

// AdaGrad (accumulated squared gradients) and Adam (bias-corrected moments),
// one step per key and Push with the key's gradients summed. A key's first
// pull gives its initial embedding; its state starts at zero.
class OptimizerModel {
 public:
  explicit OptimizerModel(const OptimizerOptions& opt) : opt_(opt) {}

  void CheckPull(std::span<const Key> keys, const std::vector<float>& out) {
    for (size_t i = 0; i < keys.size(); ++i) {
      auto [it, fresh] = rows_.try_emplace(keys[i]);
      Row& row = it->second;
      if (fresh) {
        row.w.assign(out.begin() + i * kDim, out.begin() + (i + 1) * kDim);
        row.s1.assign(kDim, opt_.initial_accumulator);
        row.s2.assign(kDim, 0.0);
        continue;
      }
      for (uint32_t d = 0; d < kDim; ++d) {
        ASSERT_NEAR(out[i * kDim + d], row.w[d], kTolerance) << "key " << keys[i] << " dim " << d;
      }
    }
  }

  void ApplyPush(std::span<const Key> keys, const std::vector<float>& grads) {
    std::map<Key, std::vector<double>> summed;
    for (size_t i = 0; i < keys.size(); ++i) {
      auto& g = summed.try_emplace(keys[i], kDim, 0.0).first->second;
      for (uint32_t d = 0; d < kDim; ++d) g[d] += grads[i * kDim + d];
    }
    for (const auto& [key, g] : summed) Step(rows_.at(key), g);
  }

  // Every row of the store's table equals the model, and no row is missing.
  void ExpectScanMatches(Store& store, TableId table) const {
    const std::map<Key, std::vector<float>> rows = testing::ScanRows(store, table);
    EXPECT_EQ(rows.size(), rows_.size());
    for (const auto& [k, v] : rows) {
      auto it = rows_.find(k);
      ASSERT_NE(it, rows_.end()) << "unexpected key " << k;
      for (uint32_t d = 0; d < kDim; ++d) {
        EXPECT_NEAR(v[d], it->second.w[d], kTolerance) << "key " << k << " dim " << d;
      }
    }
  }

 private:
  struct Row {
    std::vector<double> w, s1, s2;  // AdaGrad: s1 = sum of g^2; Adam: s1 = m, s2 = v
    int64_t step = 0;
  };

  void Step(Row& row, const std::vector<double>& g) {
    const double lr = opt_.learning_rate, eps = opt_.epsilon;
    ++row.step;
    for (uint32_t d = 0; d < kDim; ++d) {
      if (opt_.kind == Optimizer::kAdagrad) {
        row.s1[d] += g[d] * g[d];
        row.w[d] -= lr * g[d] / (std::sqrt(row.s1[d]) + eps);
      } else {
        const double b1 = opt_.beta1, b2 = opt_.beta2;
        row.s1[d] = b1 * row.s1[d] + (1 - b1) * g[d];
        row.s2[d] = b2 * row.s2[d] + (1 - b2) * g[d] * g[d];
        const double m_hat = row.s1[d] / (1 - std::pow(b1, double(row.step)));
        const double v_hat = row.s2[d] / (1 - std::pow(b2, double(row.step)));
        row.w[d] -= lr * m_hat / (std::sqrt(v_hat) + eps);
      }
    }
  }

  OptimizerOptions opt_;
  std::unordered_map<Key, Row> rows_;
};

std::vector<TableOptions> AdagradAndAdamTables() {
  std::vector<TableOptions> tables(2);
  for (int i = 0; i < 2; ++i) {
    tables[i].name = i == 0 ? "adagrad" : "adam";
    tables[i].dim = kDim;
    tables[i].optimizer.kind = i == 0 ? Optimizer::kAdagrad : Optimizer::kAdam;
  }
  return tables;
}

TEST_P(StoreOptimizerTest, StateMovesWithItsRowThroughEveryTier) {
  const std::vector<TableOptions> tables = AdagradAndAdamTables();
  std::vector<OptimizerModel> models = {OptimizerModel(tables[0].optimizer),
                                        OptimizerModel(tables[1].optimizer)};
  std::mt19937_64 rng(9);
  // A batch of keys (duplicates included) of a random table: pull, check,
  // push random gradients, advance the clock.
  auto step = [&](Store& store, WorkerId w, int n) {
    TableId t = rng() % 2;
    std::vector<Key> keys(1 + rng() % 100);
    for (auto& k : keys) k = rng() % 600;
    if (n % 3 == 0) {
      ASSERT_TRUE(store.Intent(w, t, keys, n + 1, n + 2).ok());
    }
    std::vector<float> out(keys.size() * kDim), grads(keys.size() * kDim);
    for (auto& g : grads) g = float(int(rng() % 200) - 100) / 100.0f;
    ASSERT_TRUE(Pull(store, w, t, keys, out.data()).ok()) << "step " << n;
    ASSERT_NO_FATAL_FAILURE(models[t].CheckPull(keys, out));
    ASSERT_TRUE(Push(store, w, t, keys, grads.data()).ok()) << "step " << n;
    models[t].ApplyPush(keys, grads);
    ASSERT_TRUE(store.AdvanceClock(w).ok());
  };
  {
    auto store = Open(Options(2 * 64, 128), tables);
    ASSERT_NE(store, nullptr);
    WorkerId w = *store->RegisterWorker(GetParam().gpu ? 0 : -1);
    for (int n = 0; n < 200; ++n) {
      ASSERT_NO_FATAL_FAILURE(step(*store, w, n));
    }
    const StoreStats s = store->Stats();
    EXPECT_GT(s.t0.evictions, 0u) << "the rows never left T0: " << s.ToString();
    EXPECT_GT(s.ssd_row_reads, 0u) << "the rows never came back from T2: " << s.ToString();
    for (TableId t = 0; t < 2; ++t) models[t].ExpectScanMatches(*store, t);
    ASSERT_TRUE(store->Checkpoint().ok());
    ASSERT_TRUE(store->Close().ok());
  }
  // The optimizer state was checkpointed with the rows: the steps after a
  // reopen continue from it (AdaGrad's sums, Adam's moments and step count).
  auto store = Open(Options(2 * 64, 128), tables);
  ASSERT_NE(store, nullptr);
  WorkerId w = *store->RegisterWorker(GetParam().gpu ? 0 : -1);
  for (int n = 200; n < 260; ++n) {
    ASSERT_NO_FATAL_FAILURE(step(*store, w, n));
  }
  for (TableId t = 0; t < 2; ++t) models[t].ExpectScanMatches(*store, t);
}

INSTANTIATE_TEST_SUITE_P(AllCombinations, StoreOptimizerTest, testing::StoreCombinations(),
                         testing::StoreCombinationName);

}  // namespace
}  // namespace strata
