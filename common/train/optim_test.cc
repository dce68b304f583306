#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/runtime/errors.h"
#include "common/train/bert_adamw.h"
#include "common/train/schedule.h"

namespace distlm::train {
namespace {

TEST(BertAdamWTest, MatchesTheClosedFormStepByStep) {
  // Scalar double-precision recomputation of the formula in the header, three steps.
  auto w = torch::tensor({0.5f, -1.0f, 2.0f}, torch::requires_grad());
  auto b = torch::tensor({0.1f}, torch::requires_grad());
  AdamWOptions o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.eps = 1e-6;
  BertAdamW opt({{"layer.dense.weight", w}, {"layer.dense.bias", b}}, o);

  std::vector<double> pw = {0.5, -1.0, 2.0}, mw(3, 0), vw(3, 0);
  double pb = 0.1, mb = 0, vb = 0;
  const std::vector<std::vector<double>> grads_w = {{0.3, -0.2, 0.1}, {0.05, 0.4, -0.3}, {-0.1, 0.0, 0.2}};
  const std::vector<double> grads_b = {0.7, -0.5, 0.25};
  for (int t = 1; t <= 3; ++t) {
    w.mutable_grad() = torch::tensor({(float)grads_w[t - 1][0], (float)grads_w[t - 1][1], (float)grads_w[t - 1][2]});
    b.mutable_grad() = torch::tensor({(float)grads_b[t - 1]});
    opt.Step();
    const double step = o.lr * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    for (int i = 0; i < 3; ++i) {
      double g = (float)grads_w[t - 1][i];
      mw[i] = 0.9 * mw[i] + 0.1 * g;
      vw[i] = 0.999 * vw[i] + 0.001 * g * g;
      pw[i] -= step * mw[i] / (std::sqrt(vw[i]) + o.eps);
      pw[i] -= o.lr * o.weight_decay * pw[i];  // weights decay
    }
    double g = (float)grads_b[t - 1];
    mb = 0.9 * mb + 0.1 * g;
    vb = 0.999 * vb + 0.001 * g * g;
    pb -= step * mb / (std::sqrt(vb) + o.eps);  // biases do not
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(w[i].item<double>(), pw[i], 2e-6) << "t=" << t;
    EXPECT_NEAR(b[0].item<double>(), pb, 2e-6) << "t=" << t;
  }
  EXPECT_EQ(opt.step_count(), 3);
  EXPECT_EQ(opt.StateBytes(), 2 * (3 + 1) * 4);
}

TEST(BertAdamWTest, DiffersFromTorchAdamWWhereEpsIsAdded) {
  // With tiny second moments the placement of eps matters: this is why the project does not
  // use torch::optim::AdamW (its traces drift ~1e-4 from the reference's).
  auto p1 = torch::tensor({1.0f}, torch::requires_grad());
  auto p2 = torch::tensor({1.0f}, torch::requires_grad());
  AdamWOptions o;
  o.lr = 0.1;
  o.eps = 1e-3;
  BertAdamW ours({{"w", p1}}, o);
  torch::optim::AdamW theirs({p2}, torch::optim::AdamWOptions(0.1).eps(1e-3).weight_decay(0));
  p1.mutable_grad() = torch::tensor({1e-3f});
  p2.mutable_grad() = torch::tensor({1e-3f});
  ours.Step();
  theirs.step();
  EXPECT_GT(std::abs(p1.item<double>() - p2.item<double>()), 1e-4);
}

TEST(BertAdamWTest, TorchSemanticsMatchTorchAdamW) {
  // --optim=adamw_torch against LibTorch's own AdamW (the C++ twin of torch.optim.AdamW), with
  // weight decay, tiny second moments (where eps placement shows) and a 70k-element tensor
  // (the fused loop's threads). Both decay every parameter here ("w" is not a bias).
  torch::manual_seed(3);
  auto init = torch::randn({70000});
  auto p1 = init.clone().requires_grad_(true);
  auto p2 = init.clone().requires_grad_(true);
  AdamWOptions o;
  o.lr = 0.05;
  o.eps = 1e-3;
  o.weight_decay = 0.1;
  o.torch_semantics = true;
  BertAdamW ours({{"w", p1}}, o);
  torch::optim::AdamW theirs({p2}, torch::optim::AdamWOptions(0.05).eps(1e-3).weight_decay(0.1));
  for (int t = 0; t < 5; ++t) {
    auto g = torch::randn({70000}) * (t % 2 == 0 ? 1e-3 : 1.0);
    p1.mutable_grad() = g.clone();
    p2.mutable_grad() = g.clone();
    ours.Step();
    theirs.step();
    const double diff = (p1 - p2).abs().max().item<double>();
    EXPECT_LT(diff, 2e-6) << "step " << t + 1;
  }
  // And the two semantics differ where eps is small against sqrt(v): one step, gradients of
  // 1e-3, eps 1e-3, no decay. Reference: 0.05 * sqrt(0.001)/0.1 * 1e-4/(1e-3+1e-3) ~ 7.9e-4;
  // torch: 0.05/0.1 * 1e-4/(1e-3+1e-3) = 0.025.
  auto a = torch::zeros({4}).requires_grad_(true);
  auto b = torch::zeros({4}).requires_grad_(true);
  AdamWOptions r;
  r.lr = 0.05;
  r.eps = 1e-3;
  AdamWOptions t = r;
  t.torch_semantics = true;
  BertAdamW reference({{"w", a}}, r), torch_like({{"w", b}}, t);
  a.mutable_grad() = torch::full({4}, 1e-3f);
  b.mutable_grad() = torch::full({4}, 1e-3f);
  reference.Step();
  torch_like.Step();
  EXPECT_NEAR(a[0].item<double>(), -0.05 * std::sqrt(0.001) / 0.1 * 1e-4 / (std::sqrt(1e-6 * 0.001) + 1e-3), 1e-7);
  EXPECT_NEAR(b[0].item<double>(), -0.05 / 0.1 * 1e-4 / (std::sqrt(1e-6 * 0.001) / std::sqrt(0.001) + 1e-3), 1e-7);
}

TEST(BertAdamWTest, DecayGroupsFollowRunGlue) {
  EXPECT_TRUE(BertAdamW::DecayApplies("bert.encoder.layer.0.attention.self.query.weight"));
  EXPECT_FALSE(BertAdamW::DecayApplies("bert.encoder.layer.0.attention.self.query.bias"));
  EXPECT_FALSE(BertAdamW::DecayApplies("bert.embeddings.LayerNorm.weight"));
  EXPECT_TRUE(BertAdamW::DecayApplies("bert.embeddings.word_embeddings.weight"));
}

TEST(ScheduleTest, LinearDecayAndWarmup) {
  LinearSchedule s(1e-3, 10, 0);
  // Update k (1-based) uses lr * (10 - (k - 1)) / 10: 1e-3, 9e-4, ..., 1e-4.
  for (int k = 1; k <= 10; ++k) EXPECT_NEAR(s.LrAfter(k - 1), 1e-3 * (10 - (k - 1)) / 10.0, 1e-15);
  EXPECT_EQ(s.LrAfter(10), 0.0);
  LinearSchedule w(1.0, 10, 4);
  EXPECT_EQ(w.Factor(0), 0.0);
  EXPECT_EQ(w.Factor(2), 0.5);
  EXPECT_EQ(w.Factor(4), 1.0);
  EXPECT_NEAR(w.Factor(7), 0.5, 1e-12);
  EXPECT_EQ(w.Factor(12), 0.0);
  EXPECT_NEAR(w.Step(), 0.25, 1e-12);
  EXPECT_EQ(w.updates_done(), 1);
  EXPECT_THROW(LinearSchedule(1.0, 0, 0), UserError);
}

TEST(ClipGradNormTest, AgreesWithLibTorchsOwn) {
  torch::manual_seed(0);
  std::vector<torch::Tensor> a, b;
  for (int i = 0; i < 4; ++i) {
    auto t = torch::randn({5, 3}, torch::requires_grad());
    t.mutable_grad() = torch::randn({5, 3});
    a.push_back(t);
    auto u = t.detach().clone().requires_grad_(true);
    u.mutable_grad() = t.grad().clone();
    b.push_back(u);
  }
  double ours = ClipGradNorm(a, 1.0);
  double theirs = torch::nn::utils::clip_grad_norm_(b, 1.0);
  EXPECT_NEAR(ours, theirs, 1e-5);
  double manual = 0;
  for (auto& t : b) manual += t.grad().pow(2).sum().item<double>();
  EXPECT_GT(std::sqrt(manual), 0);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(torch::allclose(a[i].grad(), b[i].grad()));
  EXPECT_NEAR(ClipGradNorm(a, 0), 1.0, 1e-5);  // measured after clipping: norm 1
  // Below the threshold nothing changes.
  auto before = a[0].grad().clone();
  ClipGradNorm(a, 10.0);
  EXPECT_TRUE(torch::equal(before, a[0].grad()));
}

}  // namespace
}  // namespace distlm::train
