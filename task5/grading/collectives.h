// Reduce-scatter and all-gather over equal blocks, with Gloo's fallback: what task 5's student
// writes. Defined in task5/reference/sharded_step.cc (the reference solution carries them, so
// it is a complete submission); declared here for the grader's mutant (mutant_stage.cc).
// Grader-private, as every grading/ folder.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

namespace distlm::zero {

// output (S elements) = block pg.getRank() of the element-wise sum over ranks of input (N * S
// elements). Without reduce_scatter: all_reduce of input in place, then the block is copied,
// so input is overwritten (with the sum) and twice the bytes cross the network.
void ReduceScatterSum(c10d::ProcessGroup& pg, torch::Tensor& input, torch::Tensor& output);
// output (N * S elements) = every rank's input (S elements), in rank order.
void AllGather(c10d::ProcessGroup& pg, torch::Tensor& input, torch::Tensor& output);

}  // namespace distlm::zero
