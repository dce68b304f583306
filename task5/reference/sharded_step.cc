// Task 5 reference solution.
//
// Three collectives per update where DDP has one all-reduce: a reduce-scatter of the gradient
// (each rank receives the sum of its block only), a tiny all-reduce of the squared norm for
// clipping (inside ClipGradShard), and an all-gather of the updated parameters. Reduce-scatter
// plus all-gather move the same bytes as one ring all-reduce, which is itself a reduce-scatter
// followed by an all-gather: ZeRO-2 costs no extra traffic, it only puts the optimizer step in
// the middle. (Over Gloo in LibTorch 1.13 the reduce-scatter is an all-reduce plus a slice.)
#include "task5/sharded_step.h"

#include "common/zero/reference/shard_collectives.h"

namespace distlm::task5 {

double ShardedStep(c10d::ProcessGroup& pg, zero::ShardedAdamW& opt, double max_grad_norm) {
  zero::ReduceScatterSum(pg, opt.flat_grad(), opt.grad_shard());
  opt.grad_shard().div_(pg.getSize());
  const double norm = opt.ClipGradShard(pg, max_grad_norm);
  opt.StepShard();
  zero::AllGather(pg, opt.param_shard(), opt.flat_params());
  return norm;
}

}  // namespace distlm::task5
