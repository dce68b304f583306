// Expected values are closed forms from the confusion counts, computed by hand.
#include "common/glue/metrics.h"

#include <cmath>

#include <gtest/gtest.h>

#include "common/runtime/errors.h"

namespace distlm::glue {
namespace {

TEST(MetricsTest, MixedCase) {
  // preds  1 1 1 0 0 0 1 0
  // labels 1 1 0 0 0 1 1 0   -> tp 3, fp 1, tn 3, fn 1
  Confusion c = CountConfusion({1, 1, 1, 0, 0, 0, 1, 0}, {1, 1, 0, 0, 0, 1, 1, 0});
  EXPECT_EQ(c.tp, 3);
  EXPECT_EQ(c.fp, 1);
  EXPECT_EQ(c.tn, 3);
  EXPECT_EQ(c.fn, 1);
  Metrics m = MetricsFromConfusion(c);
  EXPECT_DOUBLE_EQ(m.accuracy, 6.0 / 8);
  EXPECT_DOUBLE_EQ(m.precision, 3.0 / 4);
  EXPECT_DOUBLE_EQ(m.recall, 3.0 / 4);
  EXPECT_DOUBLE_EQ(m.f1, 6.0 / 8);
  EXPECT_DOUBLE_EQ(m.mcc, (9.0 - 1.0) / 16.0);  // (3*3 - 1*1) / sqrt(4*4*4*4)
}

TEST(MetricsTest, AsymmetricCounts) {
  // tp 5, fp 2, tn 10, fn 3
  Confusion c{5, 2, 10, 3};
  Metrics m = MetricsFromConfusion(c);
  EXPECT_DOUBLE_EQ(m.accuracy, 15.0 / 20);
  EXPECT_DOUBLE_EQ(m.precision, 5.0 / 7);
  EXPECT_DOUBLE_EQ(m.recall, 5.0 / 8);
  EXPECT_DOUBLE_EQ(m.f1, 10.0 / 15);
  EXPECT_DOUBLE_EQ(m.mcc, (50.0 - 6.0) / std::sqrt(7.0 * 8.0 * 12.0 * 13.0));
}

TEST(MetricsTest, PerfectAndInverted) {
  Metrics perfect = ComputeMetrics({0, 1, 1, 0}, {0, 1, 1, 0});
  EXPECT_DOUBLE_EQ(perfect.accuracy, 1.0);
  EXPECT_DOUBLE_EQ(perfect.f1, 1.0);
  EXPECT_DOUBLE_EQ(perfect.mcc, 1.0);
  Metrics inverted = ComputeMetrics({1, 0, 0, 1}, {0, 1, 1, 0});
  EXPECT_DOUBLE_EQ(inverted.accuracy, 0.0);
  EXPECT_DOUBLE_EQ(inverted.f1, 0.0);
  EXPECT_DOUBLE_EQ(inverted.mcc, -1.0);
}

TEST(MetricsTest, DegenerateCasesAreZeroNotNaN) {
  // No positive predictions: precision 0/0 -> 0; a predicted marginal is empty -> MCC 0.
  Metrics m = ComputeMetrics({0, 0, 0}, {1, 0, 1});
  EXPECT_DOUBLE_EQ(m.accuracy, 1.0 / 3);
  EXPECT_EQ(m.precision, 0.0);
  EXPECT_EQ(m.recall, 0.0);
  EXPECT_EQ(m.f1, 0.0);
  EXPECT_EQ(m.mcc, 0.0);
  // No positive labels and none predicted: recall and F1 are 0/0 -> 0.
  m = ComputeMetrics({0, 0}, {0, 0});
  EXPECT_DOUBLE_EQ(m.accuracy, 1.0);
  EXPECT_EQ(m.recall, 0.0);
  EXPECT_EQ(m.f1, 0.0);
  EXPECT_EQ(m.mcc, 0.0);
  // Everything predicted positive.
  m = ComputeMetrics({1, 1, 1, 1}, {1, 0, 1, 1});
  EXPECT_DOUBLE_EQ(m.precision, 3.0 / 4);
  EXPECT_DOUBLE_EQ(m.recall, 1.0);
  EXPECT_DOUBLE_EQ(m.f1, 6.0 / 7);
  EXPECT_EQ(m.mcc, 0.0);
}

TEST(MetricsTest, LargeCountsDoNotOverflow) {
  Confusion c{3000000000LL, 1000000000LL, 3000000000LL, 1000000000LL};
  EXPECT_NEAR(MetricsFromConfusion(c).mcc, 0.5, 1e-12);
}

TEST(MetricsTest, Errors) {
  EXPECT_THROW(ComputeMetrics({0, 1}, {0}), UserError);
  EXPECT_THROW(ComputeMetrics({}, {}), UserError);
  EXPECT_THROW(ComputeMetrics({0, 2}, {0, 1}), UserError);
  EXPECT_THROW(ComputeMetrics({0, 1}, {-1, 1}), UserError);
}

}  // namespace
}  // namespace distlm::glue
