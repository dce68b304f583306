// Calls a function each time backward has finished accumulating a parameter's gradient.
//
//   GradReadyHook hook(param, [&] { /* param.grad() now holds this backward's sum */ });
//
// Why not Tensor::register_hook: a tensor hook runs *before* the gradient is added to .grad
// and sees only this backward's contribution; after gradient accumulation (no_sync) the
// gradient to communicate is the accumulated .grad. So this hooks the parameter's
// AccumulateGrad node (the autograd node that writes .grad) with a post-hook, as PyTorch's DDP
// does: it runs once .grad is final for this backward. In Python this is
// Tensor.register_post_accumulate_grad_hook (PyTorch 2.1 and later).
//
// The hook runs on the thread that runs backward (the caller's, on CPU), once per backward in
// which the parameter received a gradient; never for a parameter the loss does not depend on.
// It is removed when the GradReadyHook is destroyed. The node is held here: the parameter keeps
// only a weak pointer to it, and a node recreated later would carry no hook.
#pragma once

#include <torch/types.h>
#include <torch/autograd.h>

#include <functional>
#include <memory>

namespace distlm::autograd {

class GradReadyHook {
 public:
  // Throws distlm::UserError when `param` is not a leaf tensor that requires grad.
  GradReadyHook(const torch::Tensor& param, std::function<void()> on_ready);
  ~GradReadyHook();
  GradReadyHook(GradReadyHook&& other) noexcept;
  GradReadyHook& operator=(GradReadyHook&&) = delete;
  GradReadyHook(const GradReadyHook&) = delete;
  GradReadyHook& operator=(const GradReadyHook&) = delete;

 private:
  std::shared_ptr<torch::autograd::Node> accumulator_;
  uintptr_t key_ = 0;
};

}  // namespace distlm::autograd
