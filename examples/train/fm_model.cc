#include "examples/train/fm_model.h"

#include <algorithm>
#include <cmath>

#include "base/assert.h"
#include "base/hash.h"

namespace strata::train {
namespace {

double Sigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  double e = std::exp(z);
  return e / (1.0 + e);
}

}  // namespace

double LogisticLoss(double z, double y) {
  // log(1 + exp(z)) - y z, without overflow.
  return std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z))) - y * z;
}

FmModel::FmModel(uint32_t dense_columns, const FmConfig& config)
    : config_(config), dense_columns_(dense_columns) {
  STRATA_ASSERT(config.dim > 0, "FM dimension must be positive");
  dense_.weights.assign(dense_columns, 0.0f);
  dense_.factors.resize(static_cast<size_t>(dense_columns) * config.dim);
  SplitMix64 rng(config.seed);
  for (float& v : dense_.factors) {
    const double unit = rng.NextDouble();  // [0, 1)
    v = static_cast<float>((2.0 * unit - 1.0) * config.init_scale);
  }
  accumulators_.weights.assign(dense_columns, 0.0f);
  accumulators_.factors.assign(dense_.factors.size(), 0.0f);
}

void FmModel::FactorSums(const Batch& batch, const PulledRows& rows, size_t r, double* sum,
                         double* q) const {
  const uint32_t dim = config_.dim;
  const uint32_t row_dim = RowDim(dim);
  std::fill(sum, sum + dim, 0.0);
  double squares = 0;
  const float* x = batch.dense.data() + r * dense_columns_;
  for (uint32_t d = 0; d < dense_columns_; ++d) {
    const float* v = dense_.factors.data() + static_cast<size_t>(d) * dim;
    for (uint32_t c = 0; c < dim; ++c) {
      double vx = static_cast<double>(v[c]) * x[d];
      sum[c] += vx;
      squares += vx * vx;
    }
  }
  for (size_t t = 0; t < batch.tables(); ++t) {
    int32_t slot = batch.Slot(r, t);
    if (slot < 0) continue;
    const float* v = rows[t].data() + static_cast<size_t>(slot) * row_dim;
    for (uint32_t c = 0; c < dim; ++c) {
      sum[c] += v[c];
      squares += static_cast<double>(v[c]) * v[c];
    }
  }
  *q = squares;
}

void FmModel::Forward(const Batch& batch, const PulledRows& rows,
                      std::vector<float>* logits) const {
  const uint32_t dim = config_.dim;
  const uint32_t row_dim = RowDim(dim);
  STRATA_ASSERT(rows.size() == batch.tables(), "one pulled row block per table");
  logits->assign(batch.size(), 0.0f);
  std::vector<double> s(dim);
  for (size_t r = 0; r < batch.size(); ++r) {
    double z = dense_.bias;
    const float* x = batch.dense.data() + r * dense_columns_;
    for (uint32_t d = 0; d < dense_columns_; ++d)
      z += static_cast<double>(dense_.weights[d]) * x[d];
    for (size_t t = 0; t < batch.tables(); ++t) {
      int32_t slot = batch.Slot(r, t);
      if (slot >= 0) z += rows[t][static_cast<size_t>(slot) * row_dim + dim];
    }
    double q = 0;
    FactorSums(batch, rows, r, s.data(), &q);
    double pair = 0;
    for (uint32_t c = 0; c < dim; ++c) pair += s[c] * s[c];
    z += 0.5 * (pair - q);
    (*logits)[r] = static_cast<float>(z);
  }
}

double FmModel::Backward(const Batch& batch, const PulledRows& rows,
                         const std::vector<float>& logits, PulledRows* row_grads,
                         DenseParams* dense_grads) const {
  const uint32_t dim = config_.dim;
  const uint32_t row_dim = RowDim(dim);
  const size_t n = batch.size();
  STRATA_ASSERT(logits.size() == n, "logits from Forward on this batch");
  row_grads->resize(batch.tables());
  for (size_t t = 0; t < batch.tables(); ++t) (*row_grads)[t].assign(rows[t].size(), 0.0f);
  dense_grads->bias = 0;
  dense_grads->weights.assign(dense_columns_, 0.0f);
  dense_grads->factors.assign(dense_.factors.size(), 0.0f);
  if (n == 0) return 0.0;

  double loss = 0;
  std::vector<double> s(dim);
  for (size_t r = 0; r < n; ++r) {
    const double y = batch.labels[r];
    loss += LogisticLoss(logits[r], y);
    const float g = static_cast<float>((Sigmoid(logits[r]) - y) / static_cast<double>(n));
    double q = 0;
    FactorSums(batch, rows, r, s.data(), &q);
    dense_grads->bias += g;
    const float* x = batch.dense.data() + r * dense_columns_;
    for (uint32_t d = 0; d < dense_columns_; ++d) {
      dense_grads->weights[d] += g * x[d];
      const float* v = dense_.factors.data() + static_cast<size_t>(d) * dim;
      float* gv = dense_grads->factors.data() + static_cast<size_t>(d) * dim;
      for (uint32_t c = 0; c < dim; ++c)
        gv[c] += static_cast<float>(g * x[d] * (s[c] - static_cast<double>(v[c]) * x[d]));
    }
    for (size_t t = 0; t < batch.tables(); ++t) {
      int32_t slot = batch.Slot(r, t);
      if (slot < 0) continue;
      const float* v = rows[t].data() + static_cast<size_t>(slot) * row_dim;
      float* gv = (*row_grads)[t].data() + static_cast<size_t>(slot) * row_dim;
      for (uint32_t c = 0; c < dim; ++c) gv[c] += static_cast<float>(g * (s[c] - v[c]));
      gv[dim] += g;
    }
  }
  if (config_.l2 > 0) {
    const float l2 = config_.l2;
    for (size_t t = 0; t < batch.tables(); ++t) {
      for (size_t i = 0; i < rows[t].size(); ++i) (*row_grads)[t][i] += l2 * rows[t][i];
    }
    for (size_t i = 0; i < dense_.weights.size(); ++i) {
      dense_grads->weights[i] += l2 * dense_.weights[i];
    }
    for (size_t i = 0; i < dense_.factors.size(); ++i) {
      dense_grads->factors[i] += l2 * dense_.factors[i];
    }
  }
  return loss / static_cast<double>(n);
}

void FmModel::ApplyDense(const DenseParams& grads) {
  const float lr = config_.learning_rate;
  const float eps = config_.epsilon;
  auto step = [&](float* param, float* acc, float g) {
    *acc += g * g;
    *param -= lr * g / (std::sqrt(*acc) + eps);
  };
  step(&dense_.bias, &accumulators_.bias, grads.bias);
  for (size_t i = 0; i < dense_.weights.size(); ++i) {
    step(&dense_.weights[i], &accumulators_.weights[i], grads.weights[i]);
  }
  for (size_t i = 0; i < dense_.factors.size(); ++i) {
    step(&dense_.factors[i], &accumulators_.factors[i], grads.factors[i]);
  }
}

}  // namespace strata::train
