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
// Formulas: docs/device-table.md. ApplyOptimizer is STRATA_HD: the GPU and
// the host runner run this very code, in the same arithmetic order.
//
// Thread safety: pure functions of their arguments; one caller per row.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd.h"

namespace strata::kernels {

enum class OptimizerKind : uint8_t { kSgd, kAdagrad, kRowwiseAdagrad, kAdam, kFtrl };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kAdagrad;
  float learning_rate = 0.01f;        // SGD, AdaGrad, Adam step size
  float epsilon = 1e-8f;              // AdaGrad / Adam denominator guard
  float initial_accumulator = 0.0f;   // AdaGrad acc and FTRL n start here
  float beta1 = 0.9f;                 // Adam first-moment decay
  float beta2 = 0.999f;               // Adam second-moment decay
  float ftrl_alpha = 0.05f;           // FTRL per-coordinate learning rate alpha
  float ftrl_beta = 1.0f;             // FTRL learning-rate smoothing beta
  float ftrl_l1 = 0.0f;               // FTRL L1 strength (sparsity)
  float ftrl_l2 = 0.0f;               // FTRL L2 strength
};

// Floats of optimizer state per row: SGD 0, AdaGrad dim, row-wise AdaGrad 1,
// Adam 2*dim+1, FTRL 2*dim.
STRATA_HD inline uint32_t StateFloats(OptimizerKind kind, uint32_t dim) {
  switch (kind) {
    case OptimizerKind::kSgd: return 0;
    case OptimizerKind::kAdagrad: return dim;
    case OptimizerKind::kRowwiseAdagrad: return 1;
    case OptimizerKind::kAdam: return 2 * dim + 1;
    case OptimizerKind::kFtrl: return 2 * dim;
  }
  return 0;
}

// Name for messages and benchmark output ("adagrad").
const char* OptimizerName(OptimizerKind kind);

// Initial optimizer state of a fresh row (writes the StateFloats floats
// that follow the dim weights).
STRATA_HD inline void InitOptimizerState(const OptimizerOptions& opt, uint32_t dim, float* row) {
  float* state = row + dim;
  switch (opt.kind) {
    case OptimizerKind::kSgd: break;
    case OptimizerKind::kAdagrad:
      for (uint32_t i = 0; i < dim; ++i) state[i] = opt.initial_accumulator;
      break;
    case OptimizerKind::kRowwiseAdagrad: state[0] = opt.initial_accumulator; break;
    case OptimizerKind::kAdam:
      for (uint32_t i = 0; i < 2 * dim + 1; ++i) state[i] = 0.0f;
      break;
    case OptimizerKind::kFtrl:
      for (uint32_t i = 0; i < dim; ++i) state[i] = 0.0f;
      for (uint32_t i = 0; i < dim; ++i) state[dim + i] = opt.initial_accumulator;
      break;
  }
}

// Applies one optimizer step with gradient grad[dim] to row in place.
// REQUIRES: row holds dim + StateFloats(opt.kind, dim) floats.
STRATA_HD inline void ApplyOptimizer(const OptimizerOptions& opt, uint32_t dim, float* row,
                                     const float* grad) {
  float* w = row;
  float* state = row + dim;
  const float lr = opt.learning_rate;
  switch (opt.kind) {
    case OptimizerKind::kSgd:
      for (uint32_t i = 0; i < dim; ++i) w[i] = w[i] - lr * grad[i];
      break;
    case OptimizerKind::kAdagrad:
      for (uint32_t i = 0; i < dim; ++i) {
        const float g = grad[i];
        const float acc = state[i] + g * g;
        state[i] = acc;
        w[i] = w[i] - lr * g / (sqrtf(acc) + opt.epsilon);
      }
      break;
    case OptimizerKind::kRowwiseAdagrad: {
      float sum_sq = 0.0f;
      for (uint32_t i = 0; i < dim; ++i) sum_sq = sum_sq + grad[i] * grad[i];
      const float acc = state[0] + sum_sq / static_cast<float>(dim);
      state[0] = acc;
      const float denom = sqrtf(acc) + opt.epsilon;
      for (uint32_t i = 0; i < dim; ++i) w[i] = w[i] - lr * grad[i] / denom;
      break;
    }
    case OptimizerKind::kAdam: {
      float* m = state;
      float* v = state + dim;
      const float step = state[2 * dim] + 1.0f;
      state[2 * dim] = step;
      // Bias corrections in double, rounded once: 1 - beta^t.
      const float bc1 = static_cast<float>(1.0 - pow(static_cast<double>(opt.beta1), step));
      const float bc2 = static_cast<float>(1.0 - pow(static_cast<double>(opt.beta2), step));
      for (uint32_t i = 0; i < dim; ++i) {
        const float g = grad[i];
        const float mi = opt.beta1 * m[i] + (1.0f - opt.beta1) * g;
        const float vi = opt.beta2 * v[i] + (1.0f - opt.beta2) * (g * g);
        m[i] = mi;
        v[i] = vi;
        const float m_hat = mi / bc1;
        const float v_hat = vi / bc2;
        w[i] = w[i] - lr * m_hat / (sqrtf(v_hat) + opt.epsilon);
      }
      break;
    }
    case OptimizerKind::kFtrl: {
      float* z = state;
      float* n = state + dim;
      for (uint32_t i = 0; i < dim; ++i) {
        const float g = grad[i];
        const float n_old = n[i];
        const float n_new = n_old + g * g;
        const float sigma = (sqrtf(n_new) - sqrtf(n_old)) / opt.ftrl_alpha;
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
      }
      break;
    }
  }
}

}  // namespace strata::kernels
