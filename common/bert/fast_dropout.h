// Dropout with a counter-based random mask.
//
// LibTorch's CPU dropout draws a Bernoulli variable per element from a Mersenne Twister and
// keeps the mask for backward: ~10% of a BERT training step here. This one hashes (seed,
// element index) into a uniform 32-bit number, so the mask costs a few integer operations per
// element, vectorises, and is recomputed in backward instead of stored. One 64-bit seed per
// call comes from LibTorch's global CPU generator, so torch::manual_seed and the snapshot's RNG
// state make it reproducible. The masks differ from PyTorch's (different random stream); their
// distribution is the same: keep with probability 1 - p, scale kept values by 1 / (1 - p).
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace distlm::bert {

// Training-mode dropout of a float32 tensor; p in [0, 1).
torch::Tensor FastDropout(const torch::Tensor& x, double p);

// The mask function itself (for tests): 1 where element `index` of a call with `seed` is kept.
bool DropoutKeeps(uint64_t seed, uint64_t index, double p);

}  // namespace distlm::bert
