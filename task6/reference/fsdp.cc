// Task 6 reference solution.
//
// Per unit and update: two all-gathers of the parameters (forward, then backward) and one
// reduce-scatter of the gradient, each of the unit's whole size: 3 x (N-1)/N x 4 bytes per
// parameter cross each rank's link, 1.5x what DDP's all-reduce sends, the price of keeping only
// 1/N of the parameters. Over Gloo in LibTorch 1.13 (no reduce_scatter, no _allgather_base) the
// reduce-scatter is an all-reduce plus a slice, and the all-gather fills a list of views.
// 6a's blocking functions are 6b's and 6c's launches waited at once.
#include "task6/fsdp.h"

#include <torch/utils.h>

#include <cmath>
#include <vector>

#include "common/zero/sharded_adamw.h"

namespace distlm::task6 {
namespace {

// Launches full (N x S) from every rank's S-element block.
c10::intrusive_ptr<c10d::Work> AllGatherBlocks(c10d::ProcessGroup& pg, torch::Tensor& block, torch::Tensor& full) {
  if (zero::HasReduceScatter(pg)) return pg._allgather_base(full, block);
  std::vector<std::vector<torch::Tensor>> outs(1);
  for (int r = 0; r < pg.getSize(); ++r) outs[0].push_back(full.narrow(0, r * block.numel(), block.numel()));
  std::vector<torch::Tensor> in = {block};
  return pg.allgather(outs, in);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> StartGather(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  AllocateStorage(unit.full_params());
  return AllGatherBlocks(pg, unit.param_shard(), unit.full_params());
}

void GatherUnit(c10d::ProcessGroup& pg, FsdpUnit& unit) { StartGather(pg, unit)->wait(); }

void ReshardUnit(FsdpUnit& unit) { ReleaseStorage(unit.full_params()); }

int UnitToPrefetch(int u, Pass pass, int num_units) {
  // Forward goes 0, 1, ..., backward ..., 1, 0: the next unit in the direction of travel.
  const int next = pass == Pass::kForward ? u + 1 : u - 1;
  return next >= 0 && next < num_units ? next : -1;
}

PendingReduceScatter StartReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  torch::Tensor& full = unit.full_grad();
  if (zero::HasReduceScatter(pg)) {
    // This rank's block of the sum, into a tensor of its own.
    torch::Tensor mine = torch::empty({unit.shard_numel()}, full.options());
    c10d::ReduceScatterOptions rs;
    rs.reduceOp = c10d::ReduceOp::SUM;
    return {pg._reduce_scatter_base(mine, full, rs), mine};
  }
  // No reduce-scatter: the whole sum in place; the block is read once it has arrived.
  std::vector<torch::Tensor> t = {full};
  c10d::AllreduceOptions ar;
  ar.reduceOp = c10d::ReduceOp::SUM;
  return {pg.allreduce(t, ar), full.narrow(0, static_cast<int64_t>(pg.getRank()) * unit.shard_numel(), unit.shard_numel())};
}

void FinishReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit, PendingReduceScatter& pending) {
  pending.work->wait();
  torch::NoGradGuard no_grad;
  unit.grad_shard().add_(pending.result.div_(pg.getSize()));
  pending.result = torch::Tensor();  // a view of the full gradient when it came from an all-reduce
  unit.FreeGrad();
}

void ReduceScatterGrad(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  PendingReduceScatter pending = StartReduceScatter(pg, unit);
  FinishReduceScatter(pg, unit, pending);
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
