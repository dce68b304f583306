// The model's ParallelOps (common/model/parallel_ops.h) made of task 7a's column- and
// row-parallel linears over a group: what the stage hands the model to split it.
#pragma once

#include <utility>
#include <vector>

#include "common/dist/c10d_compat.h"
#include "common/model/parallel_ops.h"
#include "task7/tensor_parallel.h"

namespace distlm::task7 {

class GroupParallelOps : public model::ParallelOps {
 public:
  explicit GroupParallelOps(dist::GroupPtr pg) : pg_(std::move(pg)) {}
  torch::Tensor ColumnLinear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const override {
    return ColumnParallelLinear(x, w, b, pg_);
  }
  torch::Tensor RowLinear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const override {
    return RowParallelLinear(x, w, b, pg_);
  }
  torch::Tensor GatherBlocks(const torch::Tensor& block, int64_t dim) const override {
    std::vector<std::vector<torch::Tensor>> out(1);
    for (int r = 0; r < world(); ++r) out[0].push_back(torch::empty_like(block));
    std::vector<torch::Tensor> in = {block.detach().contiguous()};
    pg_->allgather(out, in)->wait();
    return torch::cat(out[0], dim);
  }
  int rank() const override { return pg_->getRank(); }
  int world() const override { return pg_->getSize(); }

 private:
  dist::GroupPtr pg_;
};

}  // namespace distlm::task7
