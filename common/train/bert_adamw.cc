#include "common/train/bert_adamw.h"

#include <ATen/Parallel.h>
#include <torch/version.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>

#include "common/runtime/errors.h"
#include "common/trace/recorder.h"

// ATen's _fused_adamw_ has a CPU kernel from LibTorch 2.4 (a CUDA one from 2.0).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define DISTLM_HAS_FUSED_ADAMW 1
#endif

namespace distlm::train {

namespace {

// One pass over a parameter: both moments, the Adam step and the decoupled weight decay, in
// the reference's order of operations, in float32 like the tensor ops it replaces. Cloned for
// AVX2 so sqrt and division vectorise where the machine allows.
__attribute__((target_clones("avx512f", "avx2", "default"))) void AdamWRange(float* p, const float* g, float* m, float* v,
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
__attribute__((target_clones("avx512f", "avx2", "default"))) void TorchAdamWRange(float* p, const float* g, float* m, float* v,
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

// One parameter's part in a host-loop step.
struct HostTensor {
  float* p;
  const float* g;
  float* m;
  float* v;
  int64_t numel;
  float decay;  // kLoop's per-parameter factor: lr * weight_decay (reference) or 1 - that (torch)
};

// Whether the host loop applies to a parameter: host float32 contiguous tensors (on a GPU,
// --device=cuda, or any other layout the ATen kernels run instead).
bool LoopApplies(const torch::Tensor& p) {
  const torch::Tensor& g = p.grad();
  return p.device().is_cpu() && p.scalar_type() == torch::kFloat && p.is_contiguous() && g.is_contiguous() &&
         g.scalar_type() == torch::kFloat;
}

// Whether _fused_adamw_ takes a parameter: float32 (all distlm trains), dense, with a gradient
// of the same kind, on a device the kernel has.
bool FusedApplies(const torch::Tensor& p) {
  const torch::Tensor& g = p.grad();
  return BertAdamW::HasFused(p.device()) && p.scalar_type() == torch::kFloat && p.is_contiguous() &&
         g.is_contiguous() && g.scalar_type() == torch::kFloat && g.device() == p.device();
}

// Runs `range(tensor, begin, end)` over every element of every tensor in one parallel region:
// the elements laid end to end and cut into blocks, so BERT-base's ~200 parameters (most of
// them 768 floats, too small to split) share the threads, with one fork-join per step instead
// of one per parameter. Elementwise, so the cut changes no number.
template <typename Range>
void RunHostLoop(const std::vector<HostTensor>& tensors, Range range) {
  std::vector<int64_t> starts(tensors.size() + 1, 0);
  for (size_t i = 0; i < tensors.size(); ++i) starts[i + 1] = starts[i] + tensors[i].numel;
  at::parallel_for(0, starts.back(), 1 << 15, [&](int64_t begin, int64_t end) {
    // The last tensor starting at or before `begin` (empty tensors are stepped over).
    size_t i = std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin() - 1;
    for (; begin < end; ++i) {
      const int64_t stop = std::min(end, starts[i + 1]);
      if (stop > begin) range(tensors[i], begin - starts[i], stop - starts[i]);
      begin = stop;
    }
  });
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

bool BertAdamW::HasFused(const torch::Device& device) {
#ifdef DISTLM_HAS_FUSED_ADAMW
  return device.is_cpu() || device.is_cuda();
#else
  (void)device;
  return false;
#endif
}

AdamWKernel BertAdamW::KernelFor(const torch::Tensor& p) const {
  // _fused_adamw_ computes torch's formula; the reference's maps onto it exactly (StepFused)
  // except without bias correction, which the kernel always applies (and where lr * wd >= 1).
  const bool fusable = FusedApplies(p) && (options_.torch_semantics ||
                                           (options_.correct_bias && options_.lr * options_.weight_decay < 1.0));
  AdamWKernel k = options_.kernel;
  if (k == AdamWKernel::kAuto) {
    // Measured on BERT-base's 110M parameters, 2 threads (//common/train:adamw_bench, fastest
    // of 8 steps): on the host the one-pass loop takes ~55-64 ms, the _foreach_ operations
    // ~155-165 (ATen makes a pass over memory per operation there, ~3x the bytes; 1.13's lerp_
    // for torch's formula ~1 s), and LibTorch 2.11's _fused_adamw_ ~32-36. On an H200 (bf16,
    // batch 32, docs/gpu.md) clipping and AdamW took 3.0 ms with the _foreach_ operations and
    // 1.9 with the fused kernel. The reference formula stays on the loop on the host, where
    // its numbers are the scalar formula's to the bit.
    if (fusable && (options_.torch_semantics || p.device().is_cuda())) {
      k = AdamWKernel::kFused;
    } else {
      k = p.device().is_cpu() ? AdamWKernel::kLoop : AdamWKernel::kForeach;
    }
  }
  if (k == AdamWKernel::kLoop && !LoopApplies(p)) k = AdamWKernel::kForeach;
  if (k == AdamWKernel::kFused && !fusable) k = AdamWKernel::kForeach;
  return k;
}

void BertAdamW::Step() {
  trace::Scope span(trace::cat::kOptimizer, "AdamW");
  torch::NoGradGuard no_grad;
  ++step_;
  state_.step = step_;
  const double b1 = options_.beta1, b2 = options_.beta2, lr = options_.lr;
  // The step's scalars are computed in double, as Python does, then each kernel rounds them to
  // float32 where it computes.
  double step_size = lr;  // the reference's
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step_));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, static_cast<double>(step_)));
  if (options_.correct_bias) step_size = step_size * bc2_sqrt / bc1;
  // Sorted by kernel and weight-decay group; parameters without a gradient are skipped.
  std::vector<HostTensor> loop;
  Group foreach_groups[2], fused_groups[2];
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i].second;
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    const bool decays = options_.weight_decay > 0.0 && decay_[i];
    const AdamWKernel kernel = KernelFor(p);
    if (kernel == AdamWKernel::kLoop) {
      // The reference subtracts lr * weight_decay * p; torch multiplies by 1 - lr * weight_decay
      // (formed in double).
      const float decay = options_.torch_semantics ? static_cast<float>(decays ? 1.0 - lr * options_.weight_decay : 1.0)
                                                   : static_cast<float>(decays ? lr * options_.weight_decay : 0.0);
      loop.push_back({p.data_ptr<float>(), g.data_ptr<float>(), state_.exp_avg[i].data_ptr<float>(),
                      state_.exp_avg_sq[i].data_ptr<float>(), p.numel(), decay});
      continue;
    }
    Group& group = (kernel == AdamWKernel::kFused ? fused_groups : foreach_groups)[decays ? 1 : 0];
    group.p.push_back(p);
    group.g.push_back(g);
    group.m.push_back(state_.exp_avg[i]);
    group.v.push_back(state_.exp_avg_sq[i]);
  }
  if (!loop.empty()) {
    const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2), f1b1 = static_cast<float>(1.0 - b1),
                f1b2 = static_cast<float>(1.0 - b2), feps = static_cast<float>(options_.eps);
    if (options_.torch_semantics) {
      const float fstep = static_cast<float>(lr / bc1), fbc2 = static_cast<float>(bc2_sqrt);
      RunHostLoop(loop, [&](const HostTensor& t, int64_t begin, int64_t end) {
        TorchAdamWRange(t.p, t.g, t.m, t.v, begin, end, f1b1, fb2, f1b2, feps, fstep, fbc2, t.decay);
      });
    } else {
      const float fstep = static_cast<float>(step_size);
      RunHostLoop(loop, [&](const HostTensor& t, int64_t begin, int64_t end) {
        AdamWRange(t.p, t.g, t.m, t.v, begin, end, fb1, f1b1, fb2, f1b2, feps, fstep, t.decay);
      });
    }
  }
  for (int decays = 0; decays < 2; ++decays) {
    if (!foreach_groups[decays].p.empty()) StepForeach(foreach_groups[decays], decays == 1);
    if (!fused_groups[decays].p.empty()) StepFused(fused_groups[decays], decays == 1);
  }
}

void BertAdamW::StepForeach(Group& group, bool decays) {
  const double b1 = options_.beta1, b2 = options_.beta2, lr = options_.lr, eps = options_.eps;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(step_));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(b2, static_cast<double>(step_)));
  if (!options_.torch_semantics) {
    // The reference's tensor operations, one call per operation for the whole group.
    const double step_size = options_.correct_bias ? lr * bc2_sqrt / bc1 : lr;
    at::_foreach_mul_(group.m, b1);
    at::_foreach_add_(group.m, group.g, 1.0 - b1);
    at::_foreach_mul_(group.v, b2);
    at::_foreach_addcmul_(group.v, group.g, group.g, 1.0 - b2);
    std::vector<torch::Tensor> denom = at::_foreach_sqrt(group.v);
    at::_foreach_add_(denom, eps);
    at::_foreach_addcdiv_(group.p, group.m, denom, -step_size);
    if (decays) at::_foreach_add_(group.p, group.p, -lr * options_.weight_decay);
    return;
  }
  // torch.optim.AdamW(foreach=True): decay first, the first moment through lerp.
  if (decays) at::_foreach_mul_(group.p, 1.0 - lr * options_.weight_decay);
#if TORCH_VERSION_MAJOR >= 2
  at::_foreach_lerp_(group.m, group.g, 1.0 - b1);
#else
  // 1.13 has no _foreach_lerp_; its lerp_ tensor by tensor is what torch.optim.AdamW runs there.
  for (size_t i = 0; i < group.m.size(); ++i) group.m[i].lerp_(group.g[i], 1.0 - b1);
#endif
  at::_foreach_mul_(group.v, b2);
  at::_foreach_addcmul_(group.v, group.g, group.g, 1.0 - b2);
  std::vector<torch::Tensor> denom = at::_foreach_sqrt(group.v);
  at::_foreach_div_(denom, bc2_sqrt);
  at::_foreach_add_(denom, eps);
  at::_foreach_addcdiv_(group.p, group.m, denom, -lr / bc1);
}

void BertAdamW::StepFused(Group& group, bool decays) {
#ifdef DISTLM_HAS_FUSED_ADAMW
  // The kernel reads the step count from a tensor per parameter (it does not advance it); one
  // tensor, listed once per parameter, serves them all.
  const torch::Device device = group.p.front().device();
  if (!step_tensor_.defined() || step_tensor_.device() != device) {
    step_tensor_ = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat).device(device));
  }
  step_tensor_.fill_(static_cast<double>(step_));
  const std::vector<torch::Tensor> steps(group.p.size(), step_tensor_);
  double lr = options_.lr, weight_decay = decays ? options_.weight_decay : 0.0, eps = options_.eps;
  if (!options_.torch_semantics) {
    // The kernel computes p (1 - lr wd) - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps). The
    // reference's (p - lr sqrt(bc2) / bc1 * m / (sqrt(v) + eps)) (1 - lr wd) is that formula,
    // in exact arithmetic, with eps / sqrt(bc2) for eps, lr (1 - lr wd) for lr and
    // wd / (1 - lr wd) for wd: only the float32 rounding differs (optim_test bounds it).
    const double bc2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, static_cast<double>(step_)));
    const double keep = 1.0 - lr * weight_decay;
    eps /= bc2_sqrt;
    weight_decay /= keep;
    lr *= keep;
  }
  at::_fused_adamw_(group.p, group.g, group.m, group.v, /*max_exp_avg_sqs=*/{}, steps, lr, options_.beta1,
                    options_.beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
#else
  StepForeach(group, decays);  // not reached: KernelFor gives kFused only where HasFused
#endif
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
  return ClipGradNorm(params, max_norm, nullptr);
}

double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm, const GradNormsHook& combine) {
  trace::Scope span(trace::cat::kClip, "clip_grad_norm");
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  std::vector<size_t> index;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].grad().defined()) continue;
    grads.push_back(params[i].grad());
    index.push_back(i);
  }
  if (grads.empty()) return 0.0;
  // One multi-tensor call for the gradients' norms (on CPU ATen computes them tensor by tensor
  // with the kernel norm(2) uses: the same numbers).
  std::vector<torch::Tensor> norms = at::_foreach_norm(grads, 2);
  if (combine) combine(norms, index);
  auto total = torch::stack(norms).norm(2);
  double total_norm = total.item<double>();
  if (max_norm > 0) {
    // As torch 1.13: the coefficient is a float32 tensor (max_norm * reciprocal(total + 1e-6)),
    // applied only below 1. Multiplying by its value as a scalar is the same float32 product.
    const double coef = (max_norm / (total + 1e-6)).item<double>();
    if (coef < 1.0) at::_foreach_mul_(grads, coef);
  }
  return total_norm;
}

}  // namespace distlm::train
