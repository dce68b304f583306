// Tensor parallelism's two communication points, as a model's modules see them (task 7a).
//
// A stage that splits the encoder's matrix products over T ranks hands the model one of these;
// the modules call CopyIn on the input of a column-parallel product (the identity forward, the
// gradient summed over the ranks backward: Megatron-LM's f) and ReduceOut on the partial output
// of a row-parallel one (the sum over the ranks forward, the identity backward: g). The model
// layer declares it and task 7 implements it, so common/bert needs nothing of task 7.
#pragma once

#include <torch/types.h>

namespace distlm::model {

class ParallelOps {
 public:
  virtual ~ParallelOps() = default;
  virtual torch::Tensor CopyIn(const torch::Tensor& x) const = 0;
  virtual torch::Tensor ReduceOut(const torch::Tensor& x) const = 0;
  virtual int rank() const = 0;
  virtual int world() const = 0;
};

}  // namespace distlm::model
