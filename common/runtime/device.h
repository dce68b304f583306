// Where a run's tensors live: --device=cpu|cuda.
//
// "cuda" means cuda:LOCAL_RANK, one GPU per rank on a host (as torchrun and the seed's
// CloudLab nodes have it). Model, batches, loss, optimizer state, DDP buckets and ZeRO's flat
// buffers are all put there; snapshots and the saved model are written from host copies, so
// they do not depend on the device.
#pragma once

#include <string>

#include <torch/types.h>

namespace distlm::runtime {

// Parses --device and checks that it can be had: throws distlm::UserError naming the cause
// ("this LibTorch is a CPU-only build", "no CUDA GPU is visible", "local rank 3 needs
// cuda:3 but this host has 2 GPUs") for anything that cannot run.
torch::Device ResolveDevice(const std::string& value, int local_rank, const std::string& flag = "--device");

// Whether this build of LibTorch has CUDA at all (a CUDA build on a machine without a GPU
// has it); and how many GPUs it sees now.
bool BuiltWithCuda();
int CudaDeviceCount();

}  // namespace distlm::runtime
