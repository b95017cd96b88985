#include "examples/train/fm_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "examples/train/metrics.h"

namespace strata::train {
namespace {

constexpr uint32_t kDim = 4;
constexpr uint32_t kDense = 3;

// 4 rows, 2 tables; rows 0 and 2 share key slot 0 of table 0; row 3 misses table 1.
Batch SmallBatch() {
  Batch b;
  b.rows = {0, 1, 2, 3};
  b.labels = {1, 0, 0, 1};
  b.dense = {0.5f, -1.0f, 0.0f, 1.5f, 0.2f, -0.3f, 0.0f, 0.0f, 2.0f, -0.7f, 0.4f, 1.1f};
  b.unique_keys = {{11, 12, 13}, {21, 22}};
  b.slots = {0, 0, 1, 1, 0, 0, 2, -1};
  return b;
}

PulledRows RandomRows(const Batch& b, std::mt19937* rng) {
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  PulledRows rows(b.tables());
  for (size_t t = 0; t < b.tables(); ++t) {
    rows[t].resize(b.unique_keys[t].size() * RowDim(kDim));
    for (float& v : rows[t]) v = u(*rng);
  }
  return rows;
}

FmModel RandomModel(std::mt19937* rng) {
  FmConfig config;
  config.dim = kDim;
  config.init_scale = 0.5f;
  config.seed = 3;
  config.l2 = 0;  // the loss checked is the logistic loss alone
  FmModel model(kDense, config);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  model.mutable_dense().bias = u(*rng);
  for (float& w : model.mutable_dense().weights) w = u(*rng);
  return model;
}

double Loss(const FmModel& model, const Batch& b, const PulledRows& rows) {
  std::vector<float> logits;
  model.Forward(b, rows, &logits);
  return MeanLogLoss(logits, b.labels);
}

void ExpectClose(double numeric, double analytic, const std::string& what) {
  EXPECT_NEAR(numeric, analytic, 2e-4 + 2e-2 * std::fabs(analytic)) << what;
}

TEST(FmModelTest, GradientsMatchFiniteDifferences) {
  std::mt19937 rng(42);
  const Batch b = SmallBatch();
  PulledRows rows = RandomRows(b, &rng);
  FmModel model = RandomModel(&rng);

  std::vector<float> logits;
  model.Forward(b, rows, &logits);
  PulledRows row_grads;
  DenseParams dense_grads;
  double loss = model.Backward(b, rows, logits, &row_grads, &dense_grads);
  EXPECT_NEAR(loss, Loss(model, b, rows), 1e-9);

  const float h = 1e-3f;
  for (size_t t = 0; t < rows.size(); ++t) {
    for (size_t i = 0; i < rows[t].size(); ++i) {
      float saved = rows[t][i];
      rows[t][i] = saved + h;
      double up = Loss(model, b, rows);
      rows[t][i] = saved - h;
      double down = Loss(model, b, rows);
      rows[t][i] = saved;
      ExpectClose((up - down) / (2 * h), row_grads[t][i],
                  "table " + std::to_string(t) + " float " + std::to_string(i));
    }
  }
  auto check_dense = [&](float* param, float analytic, const std::string& what) {
    float saved = *param;
    *param = saved + h;
    double up = Loss(model, b, rows);
    *param = saved - h;
    double down = Loss(model, b, rows);
    *param = saved;
    ExpectClose((up - down) / (2 * h), analytic, what);
  };
  DenseParams& dense = model.mutable_dense();
  check_dense(&dense.bias, dense_grads.bias, "bias");
  for (size_t i = 0; i < dense.weights.size(); ++i) {
    check_dense(&dense.weights[i], dense_grads.weights[i], "w" + std::to_string(i));
  }
  for (size_t i = 0; i < dense.factors.size(); ++i) {
    check_dense(&dense.factors[i], dense_grads.factors[i], "V" + std::to_string(i));
  }
}

TEST(FmModelTest, L2AddsItsGradientOncePerPulledRow) {
  std::mt19937 rng(9);
  const Batch b = SmallBatch();
  PulledRows rows = RandomRows(b, &rng);
  FmConfig config;
  config.dim = kDim;
  config.l2 = 0;
  FmModel plain(kDense, config);
  config.l2 = 0.25f;
  FmModel penalised(kDense, config);
  std::vector<float> logits;
  plain.Forward(b, rows, &logits);
  PulledRows g0, g1;
  DenseParams d0, d1;
  plain.Backward(b, rows, logits, &g0, &d0);
  penalised.Backward(b, rows, logits, &g1, &d1);
  for (size_t t = 0; t < rows.size(); ++t) {
    for (size_t i = 0; i < rows[t].size(); ++i) {
      EXPECT_NEAR(g1[t][i] - g0[t][i], 0.25f * rows[t][i], 1e-6);  // key 11 used twice: once
    }
  }
  EXPECT_EQ(d1.bias, d0.bias);  // the bias is not penalised
  for (size_t i = 0; i < d0.factors.size(); ++i) {
    EXPECT_NEAR(d1.factors[i] - d0.factors[i], 0.25f * plain.dense().factors[i], 1e-6);
  }
}

TEST(FmModelTest, ForwardMatchesPairwiseDefinition) {
  std::mt19937 rng(5);
  const Batch b = SmallBatch();
  PulledRows rows = RandomRows(b, &rng);
  FmModel model = RandomModel(&rng);
  std::vector<float> logits;
  model.Forward(b, rows, &logits);
  const uint32_t rd = RowDim(kDim);
  for (size_t r = 0; r < b.size(); ++r) {
    // Explicit sum over pairs i < j of <v_i, v_j> x_i x_j.
    std::vector<std::pair<const float*, double>> fields;
    double z = model.dense().bias;
    for (uint32_t d = 0; d < kDense; ++d) {
      double x = b.dense[r * kDense + d];
      z += model.dense().weights[d] * x;
      fields.push_back({model.dense().factors.data() + d * kDim, x});
    }
    for (size_t t = 0; t < b.tables(); ++t) {
      if (b.Slot(r, t) < 0) continue;
      const float* row = rows[t].data() + b.Slot(r, t) * rd;
      z += row[kDim];
      fields.push_back({row, 1.0});
    }
    for (size_t i = 0; i < fields.size(); ++i) {
      for (size_t j = i + 1; j < fields.size(); ++j) {
        double dot = 0;
        for (uint32_t c = 0; c < kDim; ++c) dot += fields[i].first[c] * fields[j].first[c];
        z += dot * fields[i].second * fields[j].second;
      }
    }
    EXPECT_NEAR(logits[r], z, 1e-5) << "row " << r;
  }
}

TEST(FmModelTest, DenseAdagradStep) {
  FmConfig config;
  config.dim = 2;
  config.learning_rate = 0.1f;
  FmModel model(1, config);
  DenseParams g;
  g.bias = 0.5f;
  g.weights = {-2.0f};
  g.factors = {0.0f, 1.0f};
  const DenseParams before = model.dense();
  model.ApplyDense(g);
  // First AdaGrad step: -lr * g / |g| = -lr * sign(g) (epsilon negligible).
  EXPECT_NEAR(model.dense().bias, before.bias - 0.1f, 1e-6);
  EXPECT_NEAR(model.dense().weights[0], before.weights[0] + 0.1f, 1e-6);
  EXPECT_EQ(model.dense().factors[0], before.factors[0]);  // zero gradient: unchanged
  EXPECT_NEAR(model.dense().factors[1], before.factors[1] - 0.1f, 1e-6);
  model.ApplyDense(g);  // accumulator sqrt(2) g^2: step lr / sqrt(2)
  EXPECT_NEAR(model.dense().bias, before.bias - 0.1f - 0.1f / std::sqrt(2.0f), 1e-6);
}

TEST(FmModelTest, InitialDenseFactorsFollowTheSeed) {
  FmConfig a;
  a.seed = 1;
  FmConfig b = a;
  b.seed = 2;
  EXPECT_EQ(FmModel(13, a).dense().factors, FmModel(13, a).dense().factors);
  EXPECT_NE(FmModel(13, a).dense().factors, FmModel(13, b).dense().factors);
  const FmModel model(13, a);
  for (float v : model.dense().factors) EXPECT_LE(std::fabs(v), a.init_scale);
}

}  // namespace
}  // namespace strata::train
