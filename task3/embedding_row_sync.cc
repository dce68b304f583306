#include "task3/embedding_row_sync.h"

#include <torch/utils.h>

#include <utility>
#include <vector>

#include "common/runtime/errors.h"

namespace distlm::task3 {

EmbeddingRowSync::EmbeddingRowSync(std::string name, torch::Tensor table, c10::intrusive_ptr<c10d::ProcessGroup> pg)
    : name_(std::move(name)), table_(std::move(table)), pg_(std::move(pg)) {
  if (table_.dim() != 2 || table_.scalar_type() != torch::kFloat) {
    throw UserError("--embedding_sync=rows: " + name_ + " must be a 2-D float32 table, got " +
                    c10::str(table_.sizes()) + " " + c10::toString(table_.scalar_type()));
  }
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> data = {table_.data()};
  pg_->broadcast(data)->wait();
}

int64_t EmbeddingRowSync::Sync() {
  torch::NoGradGuard no_grad;
  torch::Tensor grad = table_.mutable_grad();
  if (!grad.defined()) {
    throw UserError("1 parameter(s) received no gradient in this backward: " + name_ +
                    "; every parameter must take part in the loss");
  }
  // Which rows any rank touched: a row is touched where its gradient has a non-zero (NaN
  // included, so that a NaN still reaches every rank as it would densely).
  std::vector<torch::Tensor> touched = {grad.ne(0).any(1).to(torch::kFloat)};
  pg_->allreduce(touched)->wait();
  const torch::Tensor rows = touched[0].nonzero().view(-1);
  if (rows.numel() == 0) return 0;  // the same on every rank: the union is shared
  // Rows outside `rows` are zero here and on every rank: their average is already in .grad.
  std::vector<torch::Tensor> part = {grad.index_select(0, rows)};
  pg_->allreduce(part)->wait();
  part[0].div_(pg_->getSize());
  grad.index_copy_(0, rows, part[0]);
  return rows.numel();
}

}  // namespace distlm::task3
