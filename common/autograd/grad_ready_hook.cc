#include "common/autograd/grad_ready_hook.h"

#include <torch/csrc/autograd/function_hook.h>
#include <torch/autograd.h>

#include <string>
#include <utility>

#include "common/runtime/errors.h"

namespace distlm::autograd {
namespace {

// The AccumulateGrad post-hook: runs once .grad holds this backward's contribution.
class CallAfterAccumulation : public torch::autograd::FunctionPostHook {
 public:
  explicit CallAfterAccumulation(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    fn_();
    return outputs;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace

GradReadyHook::GradReadyHook(const torch::Tensor& param, std::function<void()> on_ready) {
  if (!param.defined() || !param.requires_grad() || !param.is_leaf()) {
    throw UserError("GradReadyHook: the tensor must be a parameter (a leaf tensor that requires grad)");
  }
  accumulator_ = torch::autograd::impl::grad_accumulator(param);
  if (!accumulator_) throw UserError("GradReadyHook: the parameter has no gradient accumulator");
  key_ = accumulator_->add_post_hook(std::make_unique<CallAfterAccumulation>(std::move(on_ready)));
}

GradReadyHook::GradReadyHook(GradReadyHook&& other) noexcept
    : accumulator_(std::move(other.accumulator_)), key_(other.key_) {
  other.accumulator_ = nullptr;
}

GradReadyHook::~GradReadyHook() {
  if (accumulator_) accumulator_->del_post_hook(key_);
}

}  // namespace distlm::autograd
