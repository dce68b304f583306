// Running a stage on several ranks: the process group from flags or the launcher's
// environment, communication accounting, and the gradient-synchronisation hook of tasks 2a/2b.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include "common/train/trainer.h"

namespace distlm::train {

// A stage's gradient synchronisation: afterwards every parameter's .grad on every rank holds
// the average over ranks of the gradients they computed.
using GradientSyncFn =
    std::function<void(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters)>;

// The process group of --backend/--master_ip/--master_port/--world_size/--rank (or torchrun's,
// Open MPI's, Slurm's variables), wrapped so that what goes through it is counted.
DistInfo InitDistributedFromFlags();

// Part 1 accepts the distributed flags but runs on one process: world size 1 or a one-line
// error pointing at the distributed stages.
DistInfo SingleProcessFromFlags(const std::string& stage);

// main() of a stage whose student writes the gradient synchronisation (tasks 2a and 2b).
// Logs per update comm_time_ms, compute_time_ms and the communicated tensors (count, shapes,
// dtype, bytes).
int RunGradientSyncStage(int argc, char** argv, const std::string& stage, GradientSyncFn sync);

}  // namespace distlm::train
