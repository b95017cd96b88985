// FmModel: a factorization machine with logistic regression, for click
// prediction. For an example with dense features x_d and categorical keys k_f:
//
//   logit = b + sum_d w_d x_d + sum_f w(k_f)
//         + 1/2 sum_c [ (sum_j v_jc x_j)^2 - sum_j v_jc^2 x_j^2 ]
//
// where j runs over the dense fields (factor vectors V_d, x_j = x_d) and the
// present categorical fields (factor vector v(k_f), x_j = 1). The loss is the
// mean logistic loss of the batch.
//
// Where the parameters live: the categorical part, one row per key, lives in
// Strata: row = [v_0 .. v_{dim-1}, w] (dim + 1 floats: the FM factors and the
// first-order weight share a row, so one Pull and one Push per table serve
// both; AdaGrad in the store updates all dim + 1 floats). The dense part
// (bias, w_d, V_d and their AdaGrad accumulators) is held here, in host
// memory. All of this model's arithmetic runs on the host, in a fixed order,
// so a run is deterministic for a seed.
//
// Thread safety: none; one trainer thread owns the model.
#pragma once

#include <cstdint>
#include <vector>

#include "examples/train/batch.h"

namespace strata::train {

struct FmConfig {
  uint32_t dim = 16;             // FM factor dimension (the Strata row holds dim + 1 floats)
  float learning_rate = 0.005f;  // AdaGrad, dense and sparse alike (bigger overfits the sample)
  float epsilon = 1e-8f;         // AdaGrad denominator guard
  float init_scale = 0.01f;      // uniform in [-s, s], dense factors and Strata rows alike
  // L2 penalty l2/2 * |p|^2 on every parameter a batch uses (each pulled row
  // once per batch, the dense part every batch): against memorising the
  // many keys seen only a few times. 0 turns it off.
  float l2 = 0.01f;
  uint64_t seed = 1;  // initial dense factors
};

// Floats per Strata row for factor dimension `dim`.
inline uint32_t RowDim(uint32_t dim) { return dim + 1; }

// Rows pulled for one batch: per table, unique_keys[t].size() * RowDim floats.
using PulledRows = std::vector<std::vector<float>>;

// The dense parameters (or their gradients), flattened.
struct DenseParams {
  float bias = 0;
  std::vector<float> weights;  // dense columns
  std::vector<float> factors;  // dense columns * dim
};

class FmModel {
 public:
  FmModel(uint32_t dense_columns, const FmConfig& config);

  // Logits of the batch's rows from the pulled rows.
  void Forward(const Batch& batch, const PulledRows& rows, std::vector<float>* logits) const;

  // Mean logistic loss of the batch; gradients of it plus the L2 penalty with
  // respect to every pulled row (same layout as `rows`, summed over the
  // batch's uses of a key) and to the dense parameters. `logits` from Forward.
  double Backward(const Batch& batch, const PulledRows& rows, const std::vector<float>& logits,
                  PulledRows* row_grads, DenseParams* dense_grads) const;

  // AdaGrad step on the dense parameters.
  void ApplyDense(const DenseParams& grads);

  const DenseParams& dense() const { return dense_; }
  DenseParams& mutable_dense() { return dense_; }  // tests, and dense steps outside the model
  uint32_t dim() const { return config_.dim; }

 private:
  // For row r of the batch: s[c] = sum_j v_jc x_j and q = sum_c sum_j v_jc^2 x_j^2.
  void FactorSums(const Batch& batch, const PulledRows& rows, size_t r, double* s, double* q) const;

  FmConfig config_;
  uint32_t dense_columns_;
  DenseParams dense_;
  DenseParams accumulators_;
};

// Mean logistic loss of logit z with label y, stable for any z.
double LogisticLoss(double z, double y);

}  // namespace strata::train
