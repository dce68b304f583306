// Binary classification metrics (positive class = label id 1), as sklearn computes them with
// zero_division=0: a ratio whose denominator is 0 is 0 rather than NaN.
//
// The confusion counts are exposed so that ranks can sum them (one all-reduce of four
// integers) and compute the metrics of the whole evaluation set.
#pragma once

#include <cstdint>
#include <vector>

namespace distlm::glue {

struct Confusion {
  int64_t tp = 0, fp = 0, tn = 0, fn = 0;
  int64_t total() const { return tp + fp + tn + fn; }
};

struct Metrics {
  double accuracy = 0;   // (tp + tn) / total
  double precision = 0;  // tp / (tp + fp); 0 without positive predictions
  double recall = 0;     // tp / (tp + fn); 0 without positive labels
  double f1 = 0;         // 2 tp / (2 tp + fp + fn); 0 when that is 0 / 0
  double mcc = 0;        // Matthews correlation; 0 when a marginal is empty
};

// Counts of (prediction, label) pairs. Throws UserError for different lengths or a value
// other than 0 or 1 (naming the index).
Confusion CountConfusion(const std::vector<int64_t>& preds, const std::vector<int64_t>& labels);

// Throws UserError for an empty confusion (no examples).
Metrics MetricsFromConfusion(const Confusion& c);

Metrics ComputeMetrics(const std::vector<int64_t>& preds, const std::vector<int64_t>& labels);

}  // namespace distlm::glue
