// Task 5: one optimizer update of sharded data parallelism (ZeRO stage 2). Read
// docs/handout/part5.md first; check your work with: bazel test //task5:student_test
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/zero/sharded_adamw.h"

namespace distlm::task5 {

// Called on every rank after backward, instead of clipping and the optimizer step.
//
// What you are given (common/zero/sharded_adamw.h, flat_layout.h): every parameter and its
// gradient are views of two flat float32 buffers, opt.flat_params() and opt.flat_grad(), of
// N x S elements (N = pg.getSize(), S = opt.layout().shard_numel(); padded with zeros). Rank r
// owns block r: elements [r * S, (r + 1) * S). opt.grad_shard() and opt.param_shard() are this
// rank's S-element buffers; opt.param_shard() is a view of its block of opt.flat_params().
// opt.ClipGradShard(pg, max_norm) clips grad_shard by the norm of the WHOLE averaged gradient
// (it all-reduces the squared shard norms) and returns that norm before clipping;
// opt.StepShard() runs AdamW on param_shard with grad_shard, updating this rank's block only.
//
// What must hold when you return, on every rank:
//   - opt.grad_shard() held, when it was clipped, this rank's block of the average over ranks
//     of flat_grad (communication: each rank needs only its own block);
//   - opt.StepShard() was called exactly once, after clipping;
//   - opt.flat_params() holds every rank's updated block, so all ranks hold the same new model
//     (communication again);
//   - the return value is the gradient norm before clipping.
// Which c10d collectives do this, and what Gloo in LibTorch 1.13 lacks, is in the handout.
double ShardedStep(c10d::ProcessGroup& pg, zero::ShardedAdamW& opt, double max_grad_norm);

}  // namespace distlm::task5
