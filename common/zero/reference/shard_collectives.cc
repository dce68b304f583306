#include "common/zero/reference/shard_collectives.h"

#include <string>
#include <vector>

#include "common/runtime/errors.h"
#include "common/zero/sharded_adamw.h"

namespace distlm::zero {

void ReduceScatterSum(c10d::ProcessGroup& pg, torch::Tensor& input, torch::Tensor& output) {
  const int n = pg.getSize();
  if (input.numel() != output.numel() * n) {
    throw UserError("ReduceScatterSum: input has " + std::to_string(input.numel()) + " elements, expected " +
                    std::to_string(n) + " x output's " + std::to_string(output.numel()));
  }
  c10d::ReduceScatterOptions rs;
  rs.reduceOp = c10d::ReduceOp::SUM;
  if (HasReduceScatter(pg)) {
    pg._reduce_scatter_base(output, input, rs)->wait();
    return;
  }
  std::vector<torch::Tensor> t = {input};
  c10d::AllreduceOptions ar;
  ar.reduceOp = c10d::ReduceOp::SUM;
  pg.allreduce(t, ar)->wait();
  torch::NoGradGuard no_grad;
  output.copy_(input.narrow(0, static_cast<int64_t>(pg.getRank()) * output.numel(), output.numel()));
}

void AllGather(c10d::ProcessGroup& pg, torch::Tensor& input, torch::Tensor& output) {
  const int n = pg.getSize();
  if (output.numel() != input.numel() * n) {
    throw UserError("AllGather: output has " + std::to_string(output.numel()) + " elements, expected " +
                    std::to_string(n) + " x input's " + std::to_string(input.numel()));
  }
  if (HasReduceScatter(pg)) {
    // The shard is usually a view of output itself (param_shard of flat_params); MPI forbids a
    // send buffer inside the receive buffer, so that one is sent from a copy.
    torch::Tensor src = input.is_alias_of(output) ? input.clone() : input;
    pg._allgather_base(output, src)->wait();
    return;
  }
  // Gloo gathers into a flat buffer of its own, then copies each block into its tensor: views
  // of output.
  std::vector<std::vector<torch::Tensor>> outs(1);
  for (int r = 0; r < n; ++r) outs[0].push_back(output.narrow(0, r * input.numel(), input.numel()));
  std::vector<torch::Tensor> in = {input};
  pg.allgather(outs, in)->wait();
}

}  // namespace distlm::zero
