// The reference library's AdamW: the original BERT optimizer of pytorch_transformers 1.2.
//
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
//   p -= lr * weight_decay * p                     (decoupled, after the Adam step)
//
// eps is added to sqrt(v) before the bias correction; torch::optim::AdamW adds it after, and
// its loss traces drift about 1e-4 from the reference's. Weight decay is skipped for biases and
// LayerNorm weights, as run_glue groups the parameters.
//
// With AdamWOptions::torch_semantics the same class computes torch.optim.AdamW instead, the
// optimizer of today's transformers Trainer (its `--optim adamw_torch`):
//   p -= lr * weight_decay * p                     (first)
//   m = lerp(m, g, 1 - b1);  v = b2 v + (1 - b2) g^2
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//
// AdamWKernel says how a step is computed; every kernel computes the formulas above, and they
// differ only in float32 rounding (which operations round, and whether ATen fuses a multiply
// and an add): optim_test states the bounds.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "common/train/optimizer.h"

namespace distlm::train {

// How Step runs.
enum class AdamWKernel {
  // The fastest measured (BertAdamW::KernelFor has the numbers): on a GPU with LibTorch >= 2.4
  // kFused; on the host kFused for torch_semantics there, otherwise kLoop; kForeach elsewhere.
  kAuto,
  // distlm's own host loop: one pass over p, g, m, v per element, one parallel region for all
  // parameters. Host float32 contiguous tensors only; the others take kForeach.
  kLoop,
  // ATen's multi-tensor _foreach_* operations over each weight-decay group, operation for
  // operation the reference library's (or torch.optim.AdamW(foreach=True)'s) tensor ops. On
  // CUDA each is one multi-tensor launch; on CPU ATen runs them tensor by tensor, a pass each.
  kForeach,
  // ATen's _fused_adamw_ (torch.optim.AdamW(fused=True)) on LibTorch >= 2.4 (CPU and CUDA):
  // torch's formula as it is, the reference's with eps, lr and weight decay rewritten per step
  // (BertAdamW::StepFused), not without bias correction; elsewhere kForeach. See HasFused.
  kFused,
};

struct AdamWOptions {
  double lr = 5e-5;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool correct_bias = true;
  // false: pytorch_transformers 1.2's AdamW (distlm's default, `--optim=bert_adamw`);
  // true: torch.optim.AdamW (`--optim=adamw_torch`). See the top of this file.
  bool torch_semantics = false;
  AdamWKernel kernel = AdamWKernel::kAuto;
};

class BertAdamW : public Optimizer {
 public:
  // params: (name, parameter); names decide the weight-decay group.
  BertAdamW(std::vector<std::pair<std::string, torch::Tensor>> params, AdamWOptions options);

  // One update with the current learning rate, from each parameter's .grad (parameters
  // without a gradient are skipped, as in the reference).
  void Step() override;

  // Drops every parameter's gradient (leaves .grad undefined: PyTorch's zero_grad(set_to_none=
  // True), its default since 2.0). The next backward then stores each gradient as it is made
  // instead of adding it to a zeroed buffer: two passes over the model's size fewer per
  // update, and the same numbers (0 + g == g).
  void ZeroGrad() override;

  void set_lr(double lr) override { options_.lr = lr; }
  double lr() const override { return options_.lr; }
  int64_t step_count() const override { return step_; }
  // For resuming: the bias correction continues from this many steps.
  void SetStepCount(int64_t step) { step_ = state_.step = step; }

  // True for names that get weight decay (not "bias", not "LayerNorm.weight").
  static bool DecayApplies(const std::string& name);
  // Whether this LibTorch has _fused_adamw_ for tensors on `device`.
  static bool HasFused(const torch::Device& device);
  // The kernel Step uses for a parameter (kLoop, kForeach or kFused): options.kernel resolved.
  AdamWKernel KernelFor(const torch::Tensor& p) const;

  // Optimizer state (exp_avg, exp_avg_sq per parameter, and the step), for snapshots.
  using State = OptimizerState;
  const State& state() const { return state_; }
  // The live state itself (the tensors are the moments, not copies): no communication.
  OptimizerState GatherState() override { return state_; }
  void LoadState(const State& state) override;
  // Bytes of optimizer state held (both moments).
  int64_t StateBytes() const override;

  const std::vector<std::pair<std::string, torch::Tensor>>& params() const { return params_; }

 private:
  // One kernel's update of a group of parameters that all decay or all do not.
  struct Group {
    std::vector<torch::Tensor> p, g, m, v;
  };
  void StepForeach(Group& group, bool decays);
  void StepFused(Group& group, bool decays);

  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<bool> decay_;
  AdamWOptions options_;
  State state_;
  int64_t step_ = 0;
  torch::Tensor step_tensor_;  // _fused_adamw_'s step count (a float32 scalar on the device)
};

// Scales gradients so their global L2 norm is at most max_norm, as torch.nn.utils.
// clip_grad_norm_(foreach=True): total = ||(||g_1||, ..., ||g_n||)|| (_foreach_norm, then the
// norm of the stacked norms), coef = max_norm / (total + 1e-6) in float32, every gradient
// multiplied by it (one _foreach_mul_) when coef < 1. Returns the norm before clipping.
// max_norm <= 0 only measures.
double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm);

// The same, with `combine` shown the per-tensor norms first: norms[k] is the norm of
// params[index[k]]'s gradient (the parameters without one are skipped). A stage whose
// parameters are blocks of larger tensors (task 7a's cut weights) replaces a block's norm by the
// whole tensor's there; the total, the coefficient and the scaling then follow as above.
using GradNormsHook = std::function<void(std::vector<torch::Tensor>& norms, const std::vector<size_t>& index)>;
double ClipGradNorm(const std::vector<torch::Tensor>& params, double max_norm, const GradNormsHook& combine);

}  // namespace distlm::train
