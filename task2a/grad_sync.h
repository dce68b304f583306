// Task 2a: gradient synchronisation through rank 0, with gather and scatter.
#pragma once

#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

namespace distlm::task2a {

// Called on every rank after backward, before clipping and the optimizer step. Afterwards
// every parameter's .grad must hold, on every rank, the average of the gradients the ranks
// computed: rank 0 gathers every rank's gradients, averages them, and scatters the average
// back. pg.getRank() and pg.getSize() tell this rank and the number of ranks.
void SyncGradients(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters);

}  // namespace distlm::task2a
