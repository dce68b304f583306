// Task 2b: gradient synchronisation with all_reduce.
#pragma once

#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

namespace distlm::task2b {

// Called on every rank after backward, before clipping and the optimizer step. Afterwards
// every parameter's .grad must hold, on every rank, the average of the gradients the ranks
// computed, as in task 2a, but with all_reduce: every rank sends and receives the same
// amount, whatever the number of ranks, and no rank is the bottleneck. The all_reduce sums
// (Gloo has no average); pg.getSize() is the number of ranks.
void SyncGradients(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters);

}  // namespace distlm::task2b
