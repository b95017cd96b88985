// Evaluation metrics of a click model: mean logistic loss and ROC AUC.
//
// AUC is the probability that a random positive scores above a random
// negative, ties counting one half (the Mann-Whitney statistic), computed by
// sorting: O(n log n). Plain functions of their inputs; thread-safe.
#pragma once

#include <span>

namespace strata::train {

// Mean of log(1 + exp(z)) - y z over the rows. REQUIRES: same sizes.
double MeanLogLoss(std::span<const float> logits, std::span<const float> labels);

// ROC AUC of `scores` against 0/1 `labels`; NaN when either class is absent.
// REQUIRES: same sizes.
double RocAuc(std::span<const float> scores, std::span<const float> labels);

}  // namespace strata::train
