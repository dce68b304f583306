// Tensor parallelism's products, as a model's modules see them (task 7a).
//
// A stage that splits the encoder's matrix products over T ranks hands the model one of these.
// The modules call ColumnLinear for a product whose weight holds this rank's rows (output
// features: its input passes Megatron-LM's f, the identity forward and the gradient summed over
// the ranks backward) and RowLinear for one whose weight holds this rank's columns (its partial
// product passes g, the sum over the ranks forward and the identity backward, and the whole
// bias is added once after). GatherBlocks puts a weight cut that way back together, for uses of
// the whole model (evaluation, saving). The model layer declares it and task 7 implements it
// with the student's functions, so common/bert needs nothing of task 7.
#pragma once

#include <stdexcept>
#include <string>

#include <torch/types.h>

namespace distlm::model {

class ParallelOps {
 public:
  virtual ~ParallelOps() = default;
  // y_r = f(x) W_r^T + b_r: this rank's slice of the output features.
  virtual torch::Tensor ColumnLinear(const torch::Tensor& x, const torch::Tensor& weight_rows,
                                     const torch::Tensor& bias_rows) const = 0;
  // y = g(x_r W_r^T) + b: the whole output on every rank, from this rank's slice of the input.
  virtual torch::Tensor RowLinear(const torch::Tensor& x_slice, const torch::Tensor& weight_columns,
                                  const torch::Tensor& bias) const = 0;
  // Every rank's block of a tensor cut along `dim`, concatenated in rank order (a collective).
  virtual torch::Tensor GatherBlocks(const torch::Tensor& block, int64_t dim) const = 0;
  virtual int rank() const = 0;
  virtual int world() const = 0;
};

// Refuses a split of `model`'s heads or intermediate size that does not come out even over
// `world` ranks, naming the numbers; the model's own ShardForTensorParallel calls it first.
inline void CheckTensorSplit(const std::string& model, int64_t heads, int64_t intermediate, int world) {
  if (heads % world == 0 && intermediate % world == 0) return;
  throw std::invalid_argument("tensor parallelism over " + std::to_string(world) + " ranks needs the " + model +
                              "'s heads (" + std::to_string(heads) + ") and intermediate size (" +
                              std::to_string(intermediate) + ") to divide by it");
}

// Replaces p's data with its block `rank` of `world` along `dim` (rows 0, columns 1): the cut
// GatherBlocks undoes.
inline void KeepBlock(torch::Tensor& p, int64_t dim, int rank, int world) {
  const int64_t n = p.size(dim) / world;
  p.set_data(p.detach().narrow(dim, rank * n, n).clone());
}

}  // namespace distlm::model
