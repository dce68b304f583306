// Part 1's local tests: bazel test //part1:student_test
//
// Backward and OptimizerStep on two small parameters whose numbers are known in closed form:
// the gradient of sum(w * c) is c; a gradient of norm 5 clipped to 1 is divided by 5; AdamW's
// first step moves every element by lr (its first moment is 0.1 x the clipped gradient); the
// linear schedule's rate after one of four updates is 3/4 of the base rate. Each failure says
// which of the four steps is missing or out of order.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/train/bert_adamw.h"
#include "common/train/schedule.h"
#include "part1/train_step.h"

namespace distlm::part1 {
namespace {

std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

TEST(Part1Backward, ComputesTheGradient) {
  torch::Tensor w = torch::zeros({3}, torch::requires_grad());
  torch::Tensor c = torch::tensor({1.0f, -2.0f, 3.0f});
  Backward((w * c).sum());
  ASSERT_TRUE(w.grad().defined()) << "after Backward(loss), w.grad() is empty: call backward on the loss";
  const torch::Tensor g = w.grad();
  EXPECT_TRUE(torch::allclose(g, c)) << "the gradient of sum(w * c) is c = (1, -2, 3); got (" << Num(g[0].item<double>())
                                     << ", " << Num(g[1].item<double>()) << ", " << Num(g[2].item<double>()) << ")";
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

  ASSERT_EQ(optimizer.step_count(), 1) << "the optimizer took " << optimizer.step_count()
                                       << " steps: call u.optimizer.Step() once per update";
  const torch::Tensor m = optimizer.state().exp_avg[0];  // 0.1 x w's gradient as the step saw it
  ASSERT_TRUE(m.defined());
  const double seen = m[0].item<double>() / 0.1;
  // Checked before the norm: without clipping there is no norm to return either.
  if (std::abs(seen - 0.6) > 1e-5) {
    if (std::abs(seen - 3.0) < 1e-5 && std::abs(norm - 5.0) < 1e-5) {
      ADD_FAILURE() << "the optimizer saw w's gradient unclipped (3, clipped 0.6), yet the norm returned is right: "
                       "the clipping ran after u.optimizer.Step(); clip before it";
    } else if (std::abs(seen - 3.0) < 1e-5) {
      ADD_FAILURE() << "the optimizer saw w's gradient unclipped (3, clipped 0.6): clip the gradients with "
                       "train::ClipGradNorm(u.parameters, u.max_grad_norm) before u.optimizer.Step()";
    } else {
      ADD_FAILURE() << "the optimizer saw w's gradient " << Num(seen) << " (unclipped 3, clipped 0.6): clip the "
                    << "gradients to u.max_grad_norm before the optimizer step";
    }
  } else if (std::abs(norm - 5.0) > 1e-5) {
    // What the clipped gradient's norm is: 5 x 1 / (5 + 1e-6), ClipGradNorm's coefficient.
    const double clipped = 5.0 * (1.0 / (5.0 + 1e-6));
    if (std::abs(norm - clipped) < 1e-5) {
      ADD_FAILURE() << "OptimizerStep returned " << Num(norm) << ", the gradient norm after clipping: return what "
                    << "train::ClipGradNorm returns, the norm before clipping (5 here)";
    } else {
      ADD_FAILURE() << "OptimizerStep returned " << Num(norm) << ": return what train::ClipGradNorm returns, the "
                    << "gradient norm before clipping (5 here)";
    }
  }
  // AdamW's first step moves each element with a non-zero gradient by the rate it ran with.
  const double moved = -w[0].item<double>();
  if (std::abs(moved - kLr) > 1e-6) {
    ADD_FAILURE() << "the step ran with learning rate " << Num(moved) << ", not the base rate " << Num(kLr)
                  << (std::abs(moved - kLr * 0.75) < 1e-6 ? " but the next update's" : "")
                  << ": advance the schedule after the optimizer step, not before";
  } else if (std::abs(optimizer.lr() - kLr * 0.75) > 1e-12) {
    // The linear schedule over 4 updates: k updates done give (4 - k) / 4 of the base rate.
    const double done = 4 * (1 - optimizer.lr() / kLr);
    if (std::abs(optimizer.lr() - kLr) < 1e-12) {
      ADD_FAILURE() << "after one of four updates the optimizer's learning rate is still the base rate " << Num(kLr)
                    << ", not 3/4 of it: take u.schedule.Step() and give its result to u.optimizer.set_lr";
    } else if (std::abs(done - std::round(done)) < 1e-9 && done > 1) {
      ADD_FAILURE() << "after one of four updates the optimizer's learning rate is " << Num(optimizer.lr())
                    << ", the schedule's rate after " << Num(done)
                    << " updates: call u.schedule.Step() once per update";
    } else {
      ADD_FAILURE() << "after one of four updates the optimizer's learning rate is " << Num(optimizer.lr())
                    << ", not 3/4 of the base rate: take u.schedule.Step() and give its result to "
                       "u.optimizer.set_lr";
    }
  }
  bool cleared = true;
  for (const auto& p : params) cleared = cleared && (!p.grad().defined() || p.grad().abs().sum().item<double>() == 0);
  EXPECT_TRUE(cleared) << "the gradients are still there after OptimizerStep: clear them for the next update "
                          "(u.optimizer.ZeroGrad()), or the next update adds the old ones in";
}

}  // namespace
}  // namespace distlm::part1
