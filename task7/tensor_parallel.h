// Task 7a, tensor parallelism (Megatron-LM's scheme): the mechanism.
//
// T ranks share every large matrix product of the model. A column-parallel linear splits its
// weight W (out x in) by rows, output features: rank r holds rows [r out/T, (r+1) out/T) and
// computes its slice of the output from the whole input. A row-parallel linear splits W by
// columns, input features: rank r holds columns [r in/T, (r+1) in/T), takes its slice of the
// input (what a column-parallel layer before it produced) and computes a partial product that
// the ranks sum. Pairing them (column then row: attention's Q, K, V then its output projection;
// the MLP's two linears) needs no communication between the two, and exactly two all-reduces
// per pair and pass, the conjugate operators f and g:
//
//   f (before a column-parallel layer): forward the identity; backward all-reduce (sum) the
//      gradient, since every rank's slice of the output depends on the whole input;
//   g (after a row-parallel layer): forward all-reduce (sum) the partial products; backward
//      the identity, since the sum's gradient reaches every partial unchanged.
//
// Shapes: inputs are [..., features]; weights are torch.nn.Linear's (out x in); every rank
// calls each function at the same point (they are collectives).
#pragma once

#include <torch/types.h>

#include "common/dist/c10d_compat.h"

namespace distlm::task7 {

// f: returns x (the same values) whose gradient, in backward, is summed over the group.
torch::Tensor CopyToTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg);

// g: returns the sum of x over the group; its gradient passes back unchanged.
torch::Tensor ReduceFromTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg);

// y_r = f(x) W_r^T + b_r: this rank's slice of the output features. weight_shard and
// bias_shard are this rank's rows of W and b (ShardRows).
torch::Tensor ColumnParallelLinear(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                   const torch::Tensor& bias_shard, const dist::GroupPtr& pg);

// y = g(x_r W_r^T) + b: the whole output on every rank. x_shard is this rank's slice of the
// input features, weight_shard this rank's columns of W (ShardColumns); the bias is whole and
// added once, after the sum.
torch::Tensor RowParallelLinear(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                const torch::Tensor& bias, const dist::GroupPtr& pg);

// Rank `rank`'s block of `full` along dimension 0 (a weight's rows, a bias) or 1 (a weight's
// columns), of `world` equal blocks: std::invalid_argument naming the sizes when they do not
// divide. Copies, so a shard is a parameter of its own.
torch::Tensor ShardRows(const torch::Tensor& full, int rank, int world);
torch::Tensor ShardColumns(const torch::Tensor& full, int rank, int world);

}  // namespace distlm::task7
