// Fused optimizers applied in place to a row (embedding followed by the
// optimizer state, all fp32). The state travels with the row between tiers,
// so a row is self-contained: Adam keeps its step count in the row.
//
// Row layout for dimension d (StateFloats floats follow the d weights):
//   SGD             : w[d]
//   AdaGrad         : w[d] acc[d]
//   Row-wise AdaGrad: w[d] acc
//   Adam            : w[d] m[d] v[d] step
//   FTRL-Proximal   : w[d] z[d] n[d]
// The options are the public OptimizerOptions (strata/options.h), checked by
// DeviceTable::Create. Formulas: docs/device-table.md. ApplyOptimizer is
// STRATA_HD: the GPU and the host runner run this very code, in the same
// arithmetic order.
//
// Thread safety: pure functions of their arguments; one caller per row.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd.h"
#include "strata/options.h"

namespace strata::kernels {

// Floats of optimizer state per row: SGD 0, AdaGrad dim, row-wise AdaGrad 1,
// Adam 2*dim+1, FTRL 2*dim.
STRATA_HD inline uint32_t StateFloats(Optimizer kind, uint32_t dim) {
  switch (kind) {
    case Optimizer::kSgd:
      return 0;
    case Optimizer::kAdagrad:
      return dim;
    case Optimizer::kRowwiseAdagrad:
      return 1;
    case Optimizer::kAdam:
      return 2 * dim + 1;
    case Optimizer::kFtrl:
      return 2 * dim;
  }
  return 0;
}

// Name for messages and benchmark output ("adagrad").
const char* OptimizerName(Optimizer kind);

// Initial optimizer state of a fresh row (writes the StateFloats floats
// that follow the dim weights).
STRATA_HD inline void InitOptimizerState(const OptimizerOptions& opt, uint32_t dim, float* row) {
  float* state = row + dim;
  switch (opt.kind) {
    case Optimizer::kSgd:
      break;
    case Optimizer::kAdagrad:
      for (uint32_t i = 0; i < dim; ++i) state[i] = opt.initial_accumulator;
      break;
    case Optimizer::kRowwiseAdagrad:
      state[0] = opt.initial_accumulator;
      break;
    case Optimizer::kAdam:
      for (uint32_t i = 0; i < 2 * dim + 1; ++i) state[i] = 0.0f;
      break;
    case Optimizer::kFtrl:
      for (uint32_t i = 0; i < dim; ++i) state[i] = 0.0f;
      for (uint32_t i = 0; i < dim; ++i) state[dim + i] = opt.initial_accumulator;
      break;
  }
}

// Per-row quantities of one step, computed once before the elements.
struct RowStep {
  float bias1 = 1.0f;  // Adam: 1 - beta1^t
  float bias2 = 1.0f;  // Adam: 1 - beta2^t
  float denom = 1.0f;  // row-wise AdaGrad: sqrt(acc) + epsilon
};

// Row part of a step: advances Adam's step count or row-wise AdaGrad's
// accumulator (a sequential sum over grad[dim]) and returns the scalars
// every element needs.
STRATA_HD inline RowStep BeginRowStep(const OptimizerOptions& opt, uint32_t dim, float* row,
                                      const float* grad) {
  RowStep r;
  float* state = row + dim;
  if (opt.kind == Optimizer::kRowwiseAdagrad) {
    float sum_sq = 0.0f;
    for (uint32_t i = 0; i < dim; ++i) sum_sq = sum_sq + grad[i] * grad[i];
    const float acc = state[0] + sum_sq / static_cast<float>(dim);
    state[0] = acc;
    r.denom = sqrtf(acc) + opt.epsilon;
  } else if (opt.kind == Optimizer::kAdam) {
    const float step = state[2 * dim] + 1.0f;
    state[2 * dim] = step;
    // Bias corrections in double, rounded once: 1 - beta^t.
    r.bias1 = static_cast<float>(1.0 - pow(static_cast<double>(opt.beta1), step));
    r.bias2 = static_cast<float>(1.0 - pow(static_cast<double>(opt.beta2), step));
  }
  return r;
}

// Element i of a step with gradient g (after BeginRowStep). Elements are
// independent, so the GPU updates a row with several threads and still
// rounds exactly like the sequential loop.
// Element i of a step by optimizer K (a compile-time constant, so the
// per-element loop has no branch on the kind and vectorizes).
template <Optimizer K>
STRATA_HD inline void ApplyElementOf(const OptimizerOptions& opt, uint32_t dim, float* row, float g,
                                     uint32_t i, const RowStep& r) {
  float* w = row;
  float* state = row + dim;
  const float lr = opt.learning_rate;
  switch (K) {
    case Optimizer::kSgd:
      w[i] = w[i] - lr * g;
      break;
    case Optimizer::kAdagrad: {
      const float acc = state[i] + g * g;
      state[i] = acc;
      w[i] = w[i] - lr * g / (sqrtf(acc) + opt.epsilon);
      break;
    }
    case Optimizer::kRowwiseAdagrad:
      w[i] = w[i] - lr * g / r.denom;
      break;
    case Optimizer::kAdam: {
      float* m = state;
      float* v = state + dim;
      const float mi = opt.beta1 * m[i] + (1.0f - opt.beta1) * g;
      const float vi = opt.beta2 * v[i] + (1.0f - opt.beta2) * (g * g);
      m[i] = mi;
      v[i] = vi;
      const float m_hat = mi / r.bias1;
      const float v_hat = vi / r.bias2;
      w[i] = w[i] - lr * m_hat / (sqrtf(v_hat) + opt.epsilon);
      break;
    }
    case Optimizer::kFtrl: {
      float* z = state;
      float* n = state + dim;
      const float n_old = n[i];
      const float n_new = n_old + g * g;
      // sqrt(n_new) - sqrt(n_old), written without the cancellation.
      const float sigma = g * g / (sqrtf(n_new) + sqrtf(n_old)) / opt.ftrl_alpha;
      const float zi = z[i] + g - sigma * w[i];
      z[i] = zi;
      n[i] = n_new;
      if (fabsf(zi) <= opt.ftrl_l1) {
        w[i] = 0.0f;
      } else {
        const float sign = zi < 0.0f ? -1.0f : 1.0f;
        w[i] = -(zi - sign * opt.ftrl_l1) /
               ((opt.ftrl_beta + sqrtf(n_new)) / opt.ftrl_alpha + opt.ftrl_l2);
      }
      break;
    }
  }
}

STRATA_HD inline void ApplyElement(const OptimizerOptions& opt, uint32_t dim, float* row, float g,
                                   uint32_t i, const RowStep& r) {
  switch (opt.kind) {
    case Optimizer::kSgd:
      return ApplyElementOf<Optimizer::kSgd>(opt, dim, row, g, i, r);
    case Optimizer::kAdagrad:
      return ApplyElementOf<Optimizer::kAdagrad>(opt, dim, row, g, i, r);
    case Optimizer::kRowwiseAdagrad:
      return ApplyElementOf<Optimizer::kRowwiseAdagrad>(opt, dim, row, g, i, r);
    case Optimizer::kAdam:
      return ApplyElementOf<Optimizer::kAdam>(opt, dim, row, g, i, r);
    case Optimizer::kFtrl:
      return ApplyElementOf<Optimizer::kFtrl>(opt, dim, row, g, i, r);
  }
}

template <Optimizer K>
STRATA_HD inline void ApplyRowOf(const OptimizerOptions& opt, uint32_t dim, float* row,
                                 const float* grad, const RowStep& r) {
  for (uint32_t i = 0; i < dim; ++i) ApplyElementOf<K>(opt, dim, row, grad[i], i, r);
}

// Applies one optimizer step with gradient grad[dim] to row in place.
// REQUIRES: row holds dim + StateFloats(opt.kind, dim) floats.
STRATA_HD inline void ApplyOptimizer(const OptimizerOptions& opt, uint32_t dim, float* row,
                                     const float* grad) {
  const RowStep r = BeginRowStep(opt, dim, row, grad);
  switch (opt.kind) {
    case Optimizer::kSgd:
      return ApplyRowOf<Optimizer::kSgd>(opt, dim, row, grad, r);
    case Optimizer::kAdagrad:
      return ApplyRowOf<Optimizer::kAdagrad>(opt, dim, row, grad, r);
    case Optimizer::kRowwiseAdagrad:
      return ApplyRowOf<Optimizer::kRowwiseAdagrad>(opt, dim, row, grad, r);
    case Optimizer::kAdam:
      return ApplyRowOf<Optimizer::kAdam>(opt, dim, row, grad, r);
    case Optimizer::kFtrl:
      return ApplyRowOf<Optimizer::kFtrl>(opt, dim, row, grad, r);
  }
}

}  // namespace strata::kernels
