// Megatron-LM's split of transformer layers over T ranks, applied from outside the layers (as
// picotron swaps its modules): each layer keeps this rank's block of heads (the rows of query,
// key and value, the columns of the attention's output projection) and of the feed-forward
// block (the intermediate's rows, the output's columns), and its products go through the
// split's ParallelOps. LayerNorms stay whole. Parameters keep their names and change shape in
// place, cut from the whole weights every rank loaded.
#pragma once

#include <string>

#include <torch/nn/modules/container/modulelist.h>

#include "common/model/parallel_ops.h"

namespace distlm::model {

// Every TransformerLayer of `layers` cut for rank ops->rank() of ops->world(); `ops` (kept, not
// owned) outlives the split. std::invalid_argument, naming `model` and the numbers, when the
// heads or the intermediate size do not divide by the ranks (nothing is cut then).
void ShardLayers(torch::nn::ModuleList& layers, const ParallelOps* ops, const std::string& model);

// The inverse, a collective (every rank calls it): each cut weight gathered whole through the
// layers' ops, which become the single process's again.
void UnshardLayers(torch::nn::ModuleList& layers);

}  // namespace distlm::model
