// Task 5's reference solution (task5/reference/sharded_step.cc) compiled under another name
// (BUILD's renamed_reference), for the mutant: ShardedStep as ReferenceShardedStep, and the
// reduce-scatter and all-gather the reference file carries (so that it is a complete
// submission). Grader-private, as every grading/ folder.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include "common/zero/sharded_adamw.h"

namespace distlm::zero {

// output (S elements) = block pg.getRank() of the element-wise sum over ranks of input (N * S
// elements). Without reduce_scatter: all_reduce of input in place, then the block is copied,
// so input is overwritten (with the sum) and twice the bytes cross the network.
void ReduceScatterSum(c10d::ProcessGroup& pg, torch::Tensor& input, torch::Tensor& output);
// output (N * S elements) = every rank's input (S elements), in rank order.
void AllGather(c10d::ProcessGroup& pg, torch::Tensor& input, torch::Tensor& output);

}  // namespace distlm::zero

namespace distlm::task5 {

double ReferenceShardedStep(c10d::ProcessGroup& pg, zero::ShardedAdamW& opt, double max_grad_norm);

}  // namespace distlm::task5
