#include "common/glue/metrics.h"

#include <cmath>
#include <string>

#include "common/runtime/errors.h"

namespace distlm::glue {
namespace {

double Ratio(double num, double den) { return den == 0 ? 0.0 : num / den; }

}  // namespace

Confusion CountConfusion(const std::vector<int64_t>& preds, const std::vector<int64_t>& labels) {
  if (preds.size() != labels.size()) {
    throw UserError("metrics: " + std::to_string(preds.size()) + " predictions but " + std::to_string(labels.size()) +
                    " labels");
  }
  Confusion c;
  for (size_t i = 0; i < preds.size(); ++i) {
    const int64_t p = preds[i], l = labels[i];
    if ((p != 0 && p != 1) || (l != 0 && l != 1)) {
      throw UserError("metrics: example " + std::to_string(i) + " has prediction " + std::to_string(p) +
                      " and label " + std::to_string(l) + "; binary metrics need 0 or 1");
    }
    if (p == 1) {
      (l == 1 ? c.tp : c.fp) += 1;
    } else {
      (l == 0 ? c.tn : c.fn) += 1;
    }
  }
  return c;
}

Metrics MetricsFromConfusion(const Confusion& c) {
  if (c.total() <= 0) throw UserError("metrics: no examples to score");
  // Doubles throughout: the MCC denominator is a product of four counts.
  const double tp = static_cast<double>(c.tp), fp = static_cast<double>(c.fp);
  const double tn = static_cast<double>(c.tn), fn = static_cast<double>(c.fn);
  Metrics m;
  m.accuracy = (tp + tn) / static_cast<double>(c.total());
  m.precision = Ratio(tp, tp + fp);
  m.recall = Ratio(tp, tp + fn);
  m.f1 = Ratio(2 * tp, 2 * tp + fp + fn);
  const double den = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn);
  m.mcc = den == 0 ? 0.0 : (tp * tn - fp * fn) / std::sqrt(den);
  return m;
}

Metrics ComputeMetrics(const std::vector<int64_t>& preds, const std::vector<int64_t>& labels) {
  return MetricsFromConfusion(CountConfusion(preds, labels));
}

}  // namespace distlm::glue
