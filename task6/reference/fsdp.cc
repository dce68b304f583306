// Task 6 reference solution.
//
// Per unit and update: two all-gathers of the parameters (forward, then backward) and one
// reduce-scatter of the gradient, each of the unit's whole size: 3 x (N-1)/N x 4 bytes per
// parameter cross each rank's link, 1.5x what DDP's all-reduce sends, the price of keeping only
// 1/N of the parameters. Over Gloo in LibTorch 1.13 (no reduce_scatter, no _allgather_base) the
// reduce-scatter is an all-reduce plus a slice, and the all-gather fills a list of views.
#include "task6/fsdp.h"

#include <cmath>
#include <vector>

#include "common/zero/sharded_adamw.h"

namespace distlm::task6 {
namespace {

// full (N x S) from every rank's S-element block.
void AllGatherBlocks(c10d::ProcessGroup& pg, torch::Tensor& block, torch::Tensor& full) {
  if (zero::HasReduceScatter(pg)) {
    pg._allgather_base(full, block)->wait();
    return;
  }
  std::vector<std::vector<torch::Tensor>> outs(1);
  for (int r = 0; r < pg.getSize(); ++r) outs[0].push_back(full.narrow(0, r * block.numel(), block.numel()));
  std::vector<torch::Tensor> in = {block};
  pg.allgather(outs, in)->wait();
}

// This rank's block of the sum over ranks of full (N x S): its S elements.
torch::Tensor ReduceScatterBlocks(c10d::ProcessGroup& pg, torch::Tensor& full) {
  const int64_t s = full.numel() / pg.getSize();
  c10d::ReduceScatterOptions rs;
  rs.reduceOp = c10d::ReduceOp::SUM;
  if (zero::HasReduceScatter(pg)) {
    torch::Tensor mine = torch::empty({s}, full.options());
    pg._reduce_scatter_base(mine, full, rs)->wait();
    return mine;
  }
  std::vector<torch::Tensor> t = {full};
  c10d::AllreduceOptions ar;
  ar.reduceOp = c10d::ReduceOp::SUM;
  pg.allreduce(t, ar)->wait();
  return full.narrow(0, static_cast<int64_t>(pg.getRank()) * s, s);
}

}  // namespace

void GatherUnit(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  AllocateStorage(unit.full_params());
  AllGatherBlocks(pg, unit.param_shard(), unit.full_params());
}

void ReshardUnit(FsdpUnit& unit) { ReleaseStorage(unit.full_params()); }

void ReduceScatterGrad(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  torch::NoGradGuard no_grad;
  torch::Tensor mine = ReduceScatterBlocks(pg, unit.full_grad());
  unit.grad_shard().add_(mine.div_(pg.getSize()));
  unit.FreeGrad();
}

double ShardedStep(c10d::ProcessGroup& pg, FsdpModel& model, double max_grad_norm) {
  // Every rank's part of the squared norm, summed (all_reduce sums by default).
  std::vector<torch::Tensor> parts = {torch::tensor({model.ShardSquaredNorm()}, torch::kDouble)};
  pg.allreduce(parts)->wait();
  const double norm = std::sqrt(parts[0].item<double>());
  model.ScaleGradShards(norm, max_grad_norm);
  model.StepShards();
  return norm;
}

}  // namespace distlm::task6
