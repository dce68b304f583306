// Dropout whose random mask comes from a keyed counter hash, generated in parallel.
//
// Why not torch::dropout: LibTorch 1.13 built without MKL (Debian's) draws bernoulli_ one
// mt19937 number at a time, on one thread, under the generator's lock, and then makes three
// more passes (scale the mask, multiply, and keep a float mask for backward). In a BERT-base
// step that is about a tenth of the time. Here one pass per direction does it all:
//
//   forward:  y = x * (keep ? 1/(1-p) : 0),  keep[i] = Hash(key, i) >= p * 2^32
//   backward: dx = dy * (keep ? 1/(1-p) : 0)
//
// and the saved mask is one byte per element instead of four. `key` is one 64-bit draw from
// LibTorch's default CPU generator per call, so torch::manual_seed still decides every mask,
// snapshots that save the generator's state still resume exactly, and because element i's bit
// depends only on (key, i) the mask is the same whatever the thread count. The masks differ
// from torch::dropout's (another random stream), with the same distribution: each element is
// kept independently with probability 1 - p (to within 2^-32).
#pragma once

#include <cstdint>

#include <torch/types.h>

namespace distlm::model {

// Inverted dropout with probability p of zeroing an element; x itself when p is 0 or not
// training. Differentiable in x. p must be in [0, 1); p = 1 would zero everything and is
// refused (a config error upstream).
torch::Tensor Dropout(const torch::Tensor& x, double p, bool training);

// Dropout of this rank's heads of a tensor that tensor parallelism splits by heads (task 7a):
// x is [batch * local_heads, ...] holding heads [head_offset, head_offset + local_heads) of
// `heads`, and each element gets the bit its element of the whole [batch * heads, ...] tensor
// would get from Dropout: with the ranks' generators in step, the same masks as one process.
// On the host in float32 each rank hashes its own elements only; elsewhere (a GPU, another
// dtype) each rank draws LibTorch's mask of the whole tensor and keeps its heads.
torch::Tensor DropoutOfHeads(const torch::Tensor& x, double p, bool training, int64_t heads, int64_t head_offset,
                             int64_t local_heads);

// The mask bit of element `index` for a call keyed `key`: true when kept. Exposed for tests.
bool DropoutKeeps(uint64_t key, uint64_t index, double p);

}  // namespace distlm::model
