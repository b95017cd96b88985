#include "examples/train/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "base/assert.h"
#include "examples/train/fm_model.h"

namespace strata::train {

double MeanLogLoss(std::span<const float> logits, std::span<const float> labels) {
  STRATA_ASSERT(logits.size() == labels.size(), "one label per logit");
  if (logits.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += LogisticLoss(logits[i], labels[i]);
  return sum / static_cast<double>(logits.size());
}

double RocAuc(std::span<const float> scores, std::span<const float> labels) {
  STRATA_ASSERT(scores.size() == labels.size(), "one label per score");
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Sum of the (1-based, tie-averaged) ranks of the positives.
  double rank_sum = 0;
  double positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]] > 0.5f) {
        rank_sum += mean_rank;
        positives += 1;
      }
    }
    i = j;
  }
  const double negatives = static_cast<double>(scores.size()) - positives;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  return (rank_sum - positives * (positives + 1) / 2.0) / (positives * negatives);
}

}  // namespace strata::train
