// Task 7a: your code goes here. Read docs/handout/part7.md first, and the contract in
// task7/tensor_parallel.h. Check your work with: bazel test //task7:student_test
#include "task7/tensor_parallel.h"

#include "common/runtime/errors.h"

namespace distlm::task7 {

torch::Tensor CopyToTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg) {
  // TODO(student): f (task7/tensor_parallel.h), as a torch::autograd::Function.
  StudentTodo("task7 CopyToTensorParallel (f)", "docs/handout/part7.md, section 'Task 7a'");
}

torch::Tensor ReduceFromTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg) {
  // TODO(student): g (task7/tensor_parallel.h).
  StudentTodo("task7 ReduceFromTensorParallel (g)", "docs/handout/part7.md, section 'Task 7a'");
}

torch::Tensor ColumnParallelLinear(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                   const torch::Tensor& bias_shard, const dist::GroupPtr& pg) {
  // TODO(student): this rank's slice of the output features.
  StudentTodo("task7 ColumnParallelLinear", "docs/handout/part7.md, section 'Task 7a'");
}

torch::Tensor RowParallelLinear(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                const torch::Tensor& bias, const dist::GroupPtr& pg) {
  // TODO(student): the whole output on every rank.
  StudentTodo("task7 RowParallelLinear", "docs/handout/part7.md, section 'Task 7a'");
}

}  // namespace distlm::task7
