// Task 7a reference: f and g as autograd functions, and the two parallel linears built on them.
#include "task7/tensor_parallel.h"

#include <torch/autograd.h>

#include <vector>

namespace distlm::task7 {
namespace {

namespace autograd = torch::autograd;
using autograd::AutogradContext;

// The group travels through the autograd context as the address of its front: the caller's
// GroupPtr outlives every backward that uses it (the Trainer holds it for the whole run).
int64_t Handle(const dist::GroupPtr& pg) { return reinterpret_cast<int64_t>(pg.get()); }
c10d::ProcessGroup& GroupOf(AutogradContext* ctx) {
  return *reinterpret_cast<c10d::ProcessGroup*>(ctx->saved_data["pg"].toInt());
}

torch::Tensor SumOverGroup(c10d::ProcessGroup& pg, const torch::Tensor& t) {
  std::vector<torch::Tensor> buffer = {t.contiguous().clone()};
  pg.allreduce(buffer)->wait();
  return buffer[0];
}

struct CopyToGroup : autograd::Function<CopyToGroup> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t pg) {
    ctx->saved_data["pg"] = pg;
    return x;  // autograd makes the returned input a view with this node as its history
  }
  static autograd::variable_list backward(AutogradContext* ctx, autograd::variable_list grad) {
    return {SumOverGroup(GroupOf(ctx), grad[0]), torch::Tensor()};
  }
};

struct ReduceFromGroup : autograd::Function<ReduceFromGroup> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t pg) {
    ctx->saved_data["pg"] = pg;
    return SumOverGroup(GroupOf(ctx), x);
  }
  static autograd::variable_list backward(AutogradContext*, autograd::variable_list grad) { return {grad[0], torch::Tensor()}; }
};

}  // namespace

torch::Tensor CopyToTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg) {
  return CopyToGroup::apply(x, Handle(pg));
}

torch::Tensor ReduceFromTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg) {
  return ReduceFromGroup::apply(x, Handle(pg));
}

torch::Tensor ColumnParallelLinear(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                   const torch::Tensor& bias_shard, const dist::GroupPtr& pg) {
  return torch::linear(CopyToTensorParallel(x, pg), weight_shard, bias_shard);
}

torch::Tensor RowParallelLinear(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                const torch::Tensor& bias, const dist::GroupPtr& pg) {
  return ReduceFromTensorParallel(torch::linear(x_shard, weight_shard), pg) + bias;
}

}  // namespace distlm::task7
