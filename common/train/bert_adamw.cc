#include "common/train/bert_adamw.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "common/runtime/errors.h"

namespace distlm::train {

namespace {

// One pass over a parameter: both moments, the Adam step and the decoupled weight decay, in
// the reference's order of operations, in float32 like the tensor ops it replaces. Cloned for
// AVX2 so sqrt and division vectorise where the machine allows.
__attribute__((target_clones("avx2", "default"))) void AdamWRange(float* p, const float* g, float* m, float* v,
                                                                   int64_t begin, int64_t end, float b1, float one_minus_b1,
                                                                   float b2, float one_minus_b2, float eps,
                                                                   float step_size, float decay) {
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i];
    const float mi = m[i] * b1 + one_minus_b1 * gi;
    const float vi = v[i] * b2 + one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float pi = p[i] - step_size * (mi / (std::sqrt(vi) + eps));
    pi = pi - decay * pi;
    p[i] = pi;
  }
}

// torch.optim.AdamW's single-tensor step (what it runs on CPU tensors), operation for
// operation: decay first, the first moment through lerp (torch's CPU lerp with weight < 0.5 is
// m + w (g - m)), eps added after dividing sqrt(v) by sqrt(1 - b2^t).
__attribute__((target_clones("avx2", "default"))) void TorchAdamWRange(float* p, const float* g, float* m, float* v,
                                                                        int64_t begin, int64_t end, float one_minus_b1,
                                                                        float b2, float one_minus_b2, float eps,
                                                                        float step_size, float bc2_sqrt, float keep) {
  for (int64_t i = begin; i < end; ++i) {
    const float gi = g[i];
    const float pi = p[i] * keep;
    const float mi = m[i] + one_minus_b1 * (gi - m[i]);
    const float vi = v[i] * b2 + one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - step_size * (mi / (std::sqrt(vi) / bc2_sqrt + eps));
  }
}

// The fused loops run on host float32 contiguous tensors; on a GPU (--device=cuda) or any
// other layout the tensor operations do the same. `range(p, g, m, v, begin, end)` updates
// [begin, end) of one parameter; returns false, doing nothing, where the loop does not apply.
template <typename Range>
bool RunFused(torch::Tensor& p, const torch::Tensor& g, torch::Tensor& m, torch::Tensor& v, Range range) {
  if (!(p.device().is_cpu() && p.scalar_type() == torch::kFloat && p.is_contiguous() && g.is_contiguous() &&
        g.scalar_type() == torch::kFloat)) {
    return false;
  }
  float* pp = p.data_ptr<float>();
  const float* gp = g.data_ptr<float>();
  float* mp = m.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  at::parallel_for(0, p.numel(), 1 << 15, [&](int64_t begin, int64_t end) { range(pp, gp, mp, vp, begin, end); });
  return true;
}

}  // namespace

bool BertAdamW::DecayApplies(const std::string& name) {
  // run_glue: no_decay = ['bias', 'LayerNorm.weight'], matched as substrings.
  return name.find("bias") == std::string::npos && name.find("LayerNorm.weight") == std::string::npos;
}

BertAdamW::BertAdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  if (!(options_.lr >= 0)) throw UserError("--learning_rate must be >= 0");
  if (!(options_.eps >= 0)) throw UserError("--adam_epsilon must be >= 0");
  if (!(options_.beta1 >= 0 && options_.beta1 < 1) || !(options_.beta2 >= 0 && options_.beta2 < 1)) {
    throw UserError("Adam betas must be in [0, 1)");
  }
  for (const auto& [name, p] : params_) {
    decay_.push_back(DecayApplies(name));
    state_.exp_avg.push_back(torch::zeros_like(p));
    state_.exp_avg_sq.push_back(torch::zeros_like(p));
  }
}

void BertAdamW::Step() {
  torch::NoGradGuard no_grad;
  ++step_;
  state_.step = step_;
  const double b1 = options_.beta1, b2 = options_.beta2;
  double step_size = options_.lr;
  if (options_.correct_bias) {
    // Computed in double, as Python does.
    const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step_));
    const double bc2 = 1.0 - std::pow(b2, static_cast<double>(step_));
    step_size = step_size * std::sqrt(bc2) / bc1;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i].second;
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    torch::Tensor& m = state_.exp_avg[i];
    torch::Tensor& v = state_.exp_avg_sq[i];
    const float decay = (options_.weight_decay > 0.0 && decay_[i]) ? static_cast<float>(options_.lr * options_.weight_decay) : 0.0f;
    if (options_.torch_semantics) {
      StepTorch(p, g, m, v, decay > 0);
      continue;
    }
    const bool fused = RunFused(p, g, m, v, [&](float* pp, const float* gp, float* mp, float* vp, int64_t begin, int64_t end) {
      AdamWRange(pp, gp, mp, vp, begin, end, static_cast<float>(b1), static_cast<float>(1.0 - b1), static_cast<float>(b2),
                 static_cast<float>(1.0 - b2), static_cast<float>(options_.eps), static_cast<float>(step_size), decay);
    });
    if (fused) continue;
    // Any other layout: the same formula with tensor operations.
    m.mul_(b1).add_(g, 1.0 - b1);
    v.mul_(b2).addcmul_(g, g, 1.0 - b2);
    auto denom = v.sqrt().add_(options_.eps);
    p.addcdiv_(m, denom, -step_size);
    if (decay > 0) p.add_(p, -options_.lr * options_.weight_decay);
  }
}

void BertAdamW::StepTorch(torch::Tensor& p, const torch::Tensor& g, torch::Tensor& m, torch::Tensor& v,
                          bool decays) {
  const double b1 = options_.beta1, b2 = options_.beta2;
  // torch computes these in Python floats (double); correct_bias=false is not a torch option.
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step_));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, static_cast<double>(step_)));
  const double step_size = options_.lr / bc1;
  // torch multiplies by (1 - lr * weight_decay), formed in double.
  const float keep = decays ? static_cast<float>(1.0 - options_.lr * options_.weight_decay) : 1.0f;
  const bool fused = RunFused(p, g, m, v, [&](float* pp, const float* gp, float* mp, float* vp, int64_t begin, int64_t end) {
    TorchAdamWRange(pp, gp, mp, vp, begin, end, static_cast<float>(1.0 - b1), static_cast<float>(b2),
                    static_cast<float>(1.0 - b2), static_cast<float>(options_.eps), static_cast<float>(step_size),
                    static_cast<float>(bc2_sqrt), keep);
  });
  if (fused) return;
  if (decays) p.mul_(1.0 - options_.lr * options_.weight_decay);
  m.lerp_(g, 1.0 - b1);
  v.mul_(b2).addcmul_(g, g, 1.0 - b2);
  auto denom = (v.sqrt() / bc2_sqrt).add_(options_.eps);
  p.addcdiv_(m, denom, -step_size);
}

void BertAdamW::ZeroGrad() {
  for (auto& [name, p] : params_) {
    p.mutable_grad() = torch::Tensor();
  }
}

void BertAdamW::LoadState(const State& state) {
  if (state.exp_avg.size() != params_.size() || state.exp_avg_sq.size() != params_.size()) {
    throw UserError("optimizer state has " + std::to_string(state.exp_avg.size()) +
                    " tensors, the model has " + std::to_string(params_.size()) + " parameters");
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    state_.exp_avg[i].copy_(state.exp_avg[i]);
    state_.exp_avg_sq[i].copy_(state.exp_avg_sq[i]);
  }
  step_ = state.step;
  state_.step = state.step;
}

int64_t BertAdamW::StateBytes() const {
  int64_t bytes = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    bytes += state_.exp_avg[i].nbytes() + state_.exp_avg_sq[i].nbytes();
  }
  return bytes;
}

double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& p : params) {
    if (p.grad().defined()) norms.push_back(p.grad().norm(2));
  }
  if (norms.empty()) return 0.0;
  auto total = torch::stack(norms).norm(2);
  double total_norm = total.item<double>();
  if (max_norm > 0) {
    // As torch 1.13: the coefficient stays a float tensor and multiplies every gradient.
    auto coef = max_norm / (total + 1e-6);
    if (coef.item<double>() < 1.0) {
      for (const auto& p : params) {
        if (p.grad().defined()) p.grad().mul_(coef);
      }
    }
  }
  return total_norm;
}

}  // namespace distlm::train
