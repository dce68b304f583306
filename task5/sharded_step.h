// Task 5: one optimizer update of sharded data parallelism (ZeRO stage 2).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/zero/sharded_adamw.h"

namespace distlm::task5 {

// Called on every rank after backward, instead of clipping and the optimizer step. The
// parameters and their gradients are views of opt.flat_params() and opt.flat_grad() (N x S
// elements, N = pg.getSize(); this rank owns block pg.getRank() of S elements). Must:
//   1. reduce-scatter the gradient: opt.grad_shard() = this rank's block of the average over
//      ranks of flat_grad (zero::ReduceScatterSum, then divide by N);
//   2. clip by the global norm and take the AdamW step on the shard (opt.ClipGradShard,
//      opt.StepShard): this updates opt.param_shard() only;
//   3. all-gather the updated shards, so every rank has all the new parameters
//      (zero::AllGather from opt.param_shard() into opt.flat_params()).
// Returns the gradient norm before clipping (what ClipGradShard returns).
double ShardedStep(c10d::ProcessGroup& pg, zero::ShardedAdamW& opt, double max_grad_norm);

}  // namespace distlm::task5
