// Part 1's local tests: bazel test //part1_single:student_test
//
// Backward and OptimizerStep on two small parameters whose numbers are known in closed form:
// the gradient of sum(w * c) is c; a gradient of norm 5 clipped to 1 is divided by 5; AdamW's
// first step moves every element by lr (its first moment is 0.1 x the clipped gradient); the
// linear schedule's rate after one of four updates is 3/4 of the base rate. Each failure says
// which of the four steps is missing or out of order.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "common/train/bert_adamw.h"
#include "common/train/schedule.h"
#include "part1_single/train_step.h"

namespace distlm::part1 {
namespace {

TEST(Part1Backward, ComputesTheGradient) {
  torch::Tensor w = torch::zeros({3}, torch::requires_grad());
  torch::Tensor c = torch::tensor({1.0f, -2.0f, 3.0f});
  Backward((w * c).sum());
  ASSERT_TRUE(w.grad().defined()) << "after Backward(loss), w.grad() is empty: call backward on the loss";
  EXPECT_TRUE(torch::allclose(w.grad(), c)) << "the gradient of sum(w * c) is c; got " << w.grad();
}

TEST(Part1OptimizerStep, ClipsStepsSchedulesAndClears) {
  constexpr double kLr = 0.1;
  torch::Tensor w = torch::zeros({2}, torch::requires_grad()), b = torch::zeros({2}, torch::requires_grad());
  std::vector<torch::Tensor> params = {w, b};
  train::AdamWOptions adam;
  adam.lr = kLr;
  train::BertAdamW optimizer({{"dense.weight", w}, {"dense.bias", b}}, adam);
  train::LinearSchedule schedule(kLr, /*total_updates=*/4, /*warmup_updates=*/0);
  // Gradient (3, 0, 0, 4): norm 5, clipped to norm 1.
  w.mutable_grad() = torch::tensor({3.0f, 0.0f});
  b.mutable_grad() = torch::tensor({0.0f, 4.0f});
  train::UpdateContext u{optimizer, schedule, params, /*max_grad_norm=*/1.0};
  const double norm = OptimizerStep(u);

  EXPECT_NEAR(norm, 5.0, 1e-5) << "OptimizerStep must return the gradient norm measured before clipping (5 here)";
  ASSERT_EQ(optimizer.step_count(), 1) << "the optimizer took " << optimizer.step_count()
                                       << " steps: call u.optimizer.Step() once per update";
  const torch::Tensor m = optimizer.state().exp_avg[0];  // 0.1 x w's gradient as the step saw it
  ASSERT_TRUE(m.defined());
  const double seen = m[0].item<double>() / 0.1;
  EXPECT_NEAR(seen, 0.6, 1e-5) << "the optimizer saw w's gradient " << seen
                               << " (unclipped 3, clipped 0.6): clip the gradients to u.max_grad_norm before the "
                                  "optimizer step";
  // AdamW's first step moves each element with a non-zero gradient by the rate it ran with.
  const double moved = -w[0].item<double>();
  EXPECT_NEAR(moved, kLr, 1e-6) << "the step ran with learning rate " << moved << ", not the base rate " << kLr
                                << ": advance the schedule after the optimizer step, not before";
  EXPECT_NEAR(optimizer.lr(), kLr * 0.75, 1e-12)
      << "after one of four updates the optimizer's learning rate should be 3/4 of the base rate: take "
         "u.schedule.Step() and give its result to u.optimizer.set_lr";
  for (const auto& p : params) {
    EXPECT_TRUE(!p.grad().defined() || p.grad().abs().sum().item<double>() == 0)
        << "the gradients are still there after OptimizerStep: clear them for the next update";
  }
}

}  // namespace
}  // namespace distlm::part1
