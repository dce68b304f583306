// Task 3: wrap the model in DistributedDataParallel.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/ddp/distributed_data_parallel.h"

namespace distlm::task3 {

// Called once on every rank before training, after the model is built. Returns `model`
// wrapped in ddp::DistributedDataParallel over `pg` with `options`: the C++ form of PyTorch's
// `model = DDP(model)`. From then on every backward pass leaves, in each parameter's .grad,
// the average over ranks; no gradient synchronisation after backward is needed.
std::unique_ptr<ddp::DistributedDataParallel> WrapModel(std::shared_ptr<torch::nn::Module> model,
                                                        c10::intrusive_ptr<c10d::ProcessGroup> pg,
                                                        const ddp::DdpOptions& options);

}  // namespace distlm::task3
