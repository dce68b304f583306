#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/nn/utils.h>
#include <torch/optim/adamw.h>

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

// --- Every kernel against a per-parameter reference written here, over several steps. ---

// Distance in units in the last place between two float32 values (0: the same bits).
int64_t Ulps(float a, float b) {
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, sizeof i);
    return i >= 0 ? static_cast<int64_t>(i) : -static_cast<int64_t>(i & 0x7fffffff);
  };
  return std::llabs(key(a) - key(b));
}

// How far a tensor is from its reference: the worst element in ulp, and the worst difference
// relative to the reference's largest magnitude (ulp counts blow up where a value is near zero
// after cancellation, as m = b1 m + (1 - b1) g often is; the normwise figure does not).
struct Diff {
  int64_t ulps = 0;
  double relative = 0;
  void Add(const Diff& d) {
    ulps = std::max(ulps, d.ulps);
    relative = std::max(relative, d.relative);
  }
};

Diff Compare(const torch::Tensor& a, const torch::Tensor& b) {
  auto x = a.contiguous(), y = b.contiguous();
  const float *px = x.data_ptr<float>(), *py = y.data_ptr<float>();
  Diff d;
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    d.ulps = std::max(d.ulps, Ulps(px[i], py[i]));
    worst = std::max(worst, std::abs(static_cast<double>(px[i]) - py[i]));
    scale = std::max(scale, std::abs(static_cast<double>(py[i])));
  }
  d.relative = scale > 0 ? worst / scale : worst;
  return d;
}

// One parameter's update the simple way, for the kernels to be checked against.
//   kTensorOps: ATen's per-tensor operations in the formula's order (the reference library's
//     code for the reference semantics, torch.optim.AdamW(foreach=False)'s for torch's);
//   kScalar: a plain float32 loop, one element at a time, the same order without fused
//     multiply-adds (this file is compiled with -ffp-contract=off).
enum class Reference { kTensorOps, kScalar };

struct RefParam {
  std::string name;
  torch::Tensor p, m, v;
};

void ReferenceStep(RefParam& r, const torch::Tensor& g, const AdamWOptions& o, int64_t t, Reference how) {
  const bool decays = o.weight_decay > 0 && BertAdamW::DecayApplies(r.name);
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(o.beta2, static_cast<double>(t)));
  if (how == Reference::kTensorOps) {
    if (o.torch_semantics) {
      if (decays) r.p.mul_(1.0 - o.lr * o.weight_decay);
      r.m.lerp_(g, 1.0 - o.beta1);
      r.v.mul_(o.beta2).addcmul_(g, g, 1.0 - o.beta2);
      r.p.addcdiv_(r.m, (r.v.sqrt() / bc2_sqrt).add_(o.eps), -o.lr / bc1);
    } else {
      r.m.mul_(o.beta1).add_(g, 1.0 - o.beta1);
      r.v.mul_(o.beta2).addcmul_(g, g, 1.0 - o.beta2);
      r.p.addcdiv_(r.m, r.v.sqrt().add_(o.eps), -o.lr * bc2_sqrt / bc1);
      if (decays) r.p.add_(r.p, -o.lr * o.weight_decay);
    }
    return;
  }
  float *p = r.p.data_ptr<float>(), *m = r.m.data_ptr<float>(), *v = r.v.data_ptr<float>();
  const torch::Tensor gc = g.contiguous();
  const float* gp = gc.data_ptr<float>();
  const float b1 = o.beta1, b2 = o.beta2, c1 = 1.0 - o.beta1, c2 = 1.0 - o.beta2, eps = o.eps;
  for (int64_t i = 0; i < r.p.numel(); ++i) {
    const float gi = gp[i];
    if (o.torch_semantics) {
      const float pi = p[i] * static_cast<float>(decays ? 1.0 - o.lr * o.weight_decay : 1.0);
      m[i] = m[i] + c1 * (gi - m[i]);  // torch's lerp for weights below 0.5
      v[i] = v[i] * b2 + c2 * gi * gi;
      p[i] = pi - static_cast<float>(o.lr / bc1) * (m[i] / (std::sqrt(v[i]) / static_cast<float>(bc2_sqrt) + eps));
    } else {
      m[i] = m[i] * b1 + c1 * gi;
      v[i] = v[i] * b2 + c2 * gi * gi;
      const float pi = p[i] - static_cast<float>(o.lr * bc2_sqrt / bc1) * (m[i] / (std::sqrt(v[i]) + eps));
      p[i] = pi - static_cast<float>(decays ? o.lr * o.weight_decay : 0.0) * pi;
    }
  }
}

// Clipping the way it was written before _foreach_norm: one norm per gradient, one mul_ each.
double ReferenceClip(std::vector<torch::Tensor>& grads, double max_norm) {
  std::vector<torch::Tensor> norms;
  for (const auto& g : grads) norms.push_back(g.norm(2));
  auto total = torch::stack(norms).norm(2);
  auto coef = max_norm / (total + 1e-6);
  if (coef.item<double>() < 1.0) {
    for (auto& g : grads) g.mul_(coef);
  }
  return total.item<double>();
}

struct KernelCase {
  AdamWKernel kernel;
  Reference reference;
  double max_relative;  // the stated bound (see Diff); 0 = the same bits
};

// Six steps of ClipGradNorm + Step on parameters with and without weight decay (one split
// over several of the host loop's blocks, a 1-element one, one whose gradient is missing on
// odd steps), the clip active on half of them, against ReferenceClip + ReferenceStep.
void CheckAgainstReference(bool torch_semantics, const KernelCase& c) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(7);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"encoder.dense.weight", {300, 350}}, {"encoder.dense.bias", {350}}, {"LayerNorm.weight", {350}},
      {"pooler.weight", {3, 5}},            {"classifier.bias", {1}},      {"sometimes.weight", {40}}};
  AdamWOptions o;
  o.lr = 1e-3;
  o.weight_decay = 0.01;
  o.eps = 1e-6;
  o.torch_semantics = torch_semantics;
  o.kernel = c.kernel;
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<RefParam> ref;
  for (const auto& [name, shape] : shapes) {
    auto p = torch::randn(shape);
    named.emplace_back(name, p.clone());
    ref.push_back({name, p.clone(), torch::zeros_like(p), torch::zeros_like(p)});
  }
  BertAdamW opt(named, o);
  std::vector<torch::Tensor> params;
  for (auto& [name, p] : named) params.push_back(p);
  Diff worst_clip, worst;
  for (int64_t t = 1; t <= 6; ++t) {
    std::vector<torch::Tensor> grads, ref_grads;
    for (size_t i = 0; i < named.size(); ++i) {
      if (named[i].first == "sometimes.weight" && t % 2 == 1) {
        named[i].second.mutable_grad() = torch::Tensor();
        continue;
      }
      // Norm ~ 17 on even steps (clipped to 1), ~ 0.03 on odd ones (left alone); tiny
      // entries too, where eps matters.
      auto g = torch::randn(named[i].second.sizes()) * (t % 2 == 0 ? 0.05 : 1e-4);
      named[i].second.mutable_grad() = g.clone();
      ref_grads.push_back(g);
    }
    const double ref_norm = ReferenceClip(ref_grads, 1.0);
    const double norm = ClipGradNorm(params, 1.0);
    EXPECT_EQ(norm, ref_norm) << "step " << t;
    for (size_t i = 0, k = 0; i < named.size(); ++i) {
      const torch::Tensor& g = named[i].second.grad();
      if (!g.defined()) continue;
      worst_clip.Add(Compare(g, ref_grads[k]));
      ReferenceStep(ref[i], ref_grads[k++], o, t, c.reference);
    }
    opt.Step();
    for (size_t i = 0; i < named.size(); ++i) {
      Diff d = Compare(named[i].second, ref[i].p);
      d.Add(Compare(opt.state().exp_avg[i], ref[i].m));
      d.Add(Compare(opt.state().exp_avg_sq[i], ref[i].v));
      if (c.max_relative == 0) {
        EXPECT_EQ(d.ulps, 0) << named[i].first << ", step " << t;
      } else {
        EXPECT_LE(d.relative, c.max_relative) << named[i].first << ", step " << t;
      }
      worst.Add(d);
    }
  }
  const char* names[] = {"auto", "loop", "foreach", "fused"};
  std::printf("%s semantics, kernel %s (ran %s) against the %s reference: clipped gradients %lld ulp; parameters "
              "and moments over 6 steps: worst %lld ulp, %.3g relative to the tensor's largest (bound %s)\n",
              torch_semantics ? "torch" : "reference", names[static_cast<int>(c.kernel)],
              names[static_cast<int>(opt.KernelFor(params[0]))],
              c.reference == Reference::kScalar ? "scalar" : "tensor-op", static_cast<long long>(worst_clip.ulps),
              static_cast<long long>(worst.ulps), worst.relative,
              c.max_relative == 0 ? "0 ulp" : std::to_string(c.max_relative).c_str());
  EXPECT_EQ(worst_clip.ulps, 0);
}

TEST(BertAdamWKernelsTest, LoopIsTheScalarFormulaBitForBit) {
  for (bool torch_semantics : {false, true}) CheckAgainstReference(torch_semantics, {AdamWKernel::kLoop, Reference::kScalar, 0});
}

TEST(BertAdamWKernelsTest, ForeachIsThePerTensorOpsBitForBit) {
  // On the host ATen runs each _foreach_ operation tensor by tensor with the per-tensor kernel.
  for (bool torch_semantics : {false, true}) {
    CheckAgainstReference(torch_semantics, {AdamWKernel::kForeach, Reference::kTensorOps, 0});
  }
}

TEST(BertAdamWKernelsTest, LoopAndTensorOpsDifferOnlyInRounding) {
  // ATen's add with alpha and its lerp use fused multiply-adds where the machine has them; the
  // loop rounds every product. ~1e-7 of the tensor's scale after 6 steps (a float32 ulp is
  // 6e-8 to 1.2e-7 of a value); elements near zero after cancellation differ by many ulp.
  for (bool torch_semantics : {false, true}) {
    CheckAgainstReference(torch_semantics, {AdamWKernel::kLoop, Reference::kTensorOps, 1e-6});
  }
}

TEST(BertAdamWKernelsTest, FusedMatchesBothFormulasWithinRounding) {
  // torch.optim.AdamW(fused=True) against its for-loop form: its kernel orders the arithmetic
  // its own way (~1e-7 of the scale after 6 steps). The reference formula runs through the same
  // kernel with eps, lr and weight decay rewritten each step (BertAdamW::StepFused): the same
  // numbers in exact arithmetic, so only rounding may differ (~4e-7 of the scale: the kernel
  // forms the first moment as a lerp and divides by sqrt(bc2) where the reference does not).
  if (!BertAdamW::HasFused(torch::kCPU)) {
    GTEST_SKIP() << "this LibTorch has no _fused_adamw_ on CPU (2.4+)";
  }
  CheckAgainstReference(true, {AdamWKernel::kFused, Reference::kTensorOps, 1e-6});
  CheckAgainstReference(false, {AdamWKernel::kFused, Reference::kTensorOps, 1e-6});
  CheckAgainstReference(false, {AdamWKernel::kFused, Reference::kScalar, 1e-6});
}

TEST(BertAdamWKernelsTest, FusedLeavesTheUncorrectedFormulaToForeach) {
  // The kernel always corrects the bias: without correction the step runs _foreach_ operations.
  AdamWOptions o;
  o.correct_bias = false;
  o.kernel = AdamWKernel::kFused;
  auto p = torch::zeros({4});
  p.mutable_grad() = torch::ones({4});
  BertAdamW opt({{"w", p}}, o);
  EXPECT_EQ(opt.KernelFor(p), AdamWKernel::kForeach);
  o.correct_bias = true;
  BertAdamW corrected({{"w", p}}, o);
  EXPECT_EQ(corrected.KernelFor(p), BertAdamW::HasFused(torch::kCPU) ? AdamWKernel::kFused : AdamWKernel::kForeach);
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
