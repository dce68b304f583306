// A layer's matrix products, as its modules see them: the single process's, or tensor
// parallelism's (task 7a).
//
// A stage that splits the encoder's matrix products over T ranks hands the layers one of these
// (tensor_parallel_split.h). The modules call ColumnLinear for a product whose weight holds this rank's rows (output
// features: its input passes Megatron-LM's f, the identity forward and the gradient summed over
// the ranks backward) and RowLinear for one whose weight holds this rank's columns (its partial
// product passes g, the sum over the ranks forward and the identity backward, and the whole
// bias is added once after). GatherBlocks puts a weight cut that way back together, for uses of
// the whole model (evaluation, saving). The model layer declares it and task 7 implements it
// with the student's functions, so the models need nothing of task 7.
#pragma once

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

// The products of one process that holds the whole weights: plain linear layers, and
// GatherBlocks the block itself. What a layer uses until a split hands it others.
const ParallelOps& SingleProcessOps();

}  // namespace distlm::model
