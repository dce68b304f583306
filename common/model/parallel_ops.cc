#include "common/model/parallel_ops.h"

namespace distlm::model {
namespace {

class SingleProcess final : public ParallelOps {
 public:
  // at::linear multiplies a contiguous [batch, seq, in] input as one [batch * seq, in] addmm
  // with the bias folded into the product (the C++ frontend's Linear::forward adds it in a
  // separate pass, and its backward through another node).
  torch::Tensor ColumnLinear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const override {
    return torch::linear(x, w, b);
  }
  torch::Tensor RowLinear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) const override {
    return torch::linear(x, w, b);
  }
  torch::Tensor GatherBlocks(const torch::Tensor& block, int64_t) const override { return block; }
  int rank() const override { return 0; }
  int world() const override { return 1; }
};

}  // namespace

const ParallelOps& SingleProcessOps() {
  static const SingleProcess ops;
  return ops;
}

}  // namespace distlm::model
