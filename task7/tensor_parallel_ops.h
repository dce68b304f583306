// The model's ParallelOps (common/model/parallel_ops.h) made of task 7a's f and g over a group:
// what a stage hands BertForSequenceClassification::ShardForTensorParallel.
#pragma once

#include "common/dist/c10d_compat.h"
#include "common/model/parallel_ops.h"
#include "task7/tensor_parallel.h"

namespace distlm::task7 {

class GroupParallelOps : public model::ParallelOps {
 public:
  explicit GroupParallelOps(dist::GroupPtr pg) : pg_(std::move(pg)) {}
  torch::Tensor CopyIn(const torch::Tensor& x) const override { return CopyToTensorParallel(x, pg_); }
  torch::Tensor ReduceOut(const torch::Tensor& x) const override { return ReduceFromTensorParallel(x, pg_); }
  int rank() const override { return pg_->getRank(); }
  int world() const override { return pg_->getSize(); }

 private:
  dist::GroupPtr pg_;
};

}  // namespace distlm::task7
