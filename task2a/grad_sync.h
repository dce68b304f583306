// Task 2a: gradient synchronisation through rank 0, with gather and scatter.
#pragma once

#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

namespace distlm::task2a {

// Called on every rank after backward, before clipping and the optimizer step. Afterwards
// every parameter's .grad must hold, on every rank, the average of the gradients the ranks
// computed, so that every rank takes the step one process would take on the whole batch.
// Task 2a does it the way a parameter server would, with gather and scatter through rank 0
// (no all_reduce): rank 0 alone sees every gradient, so its link carries N - 1 times what the
// others' do, which task 2b then removes. pg.getRank() and pg.getSize() tell this rank and the
// number of ranks.
void SyncGradients(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters);

}  // namespace distlm::task2a
