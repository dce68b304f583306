// Task 5: your code goes here. Read docs/handout/part5.md first, and the contract in
// task5/sharded_step.h. Check your work with: bazel test //task5:student_test
#include "task5/sharded_step.h"

#include "common/runtime/errors.h"

namespace distlm::task5 {

double ShardedStep(c10d::ProcessGroup& pg, zero::ShardedAdamW& opt, double max_grad_norm) {
  // TODO(student): what task5/sharded_step.h says must hold when you return.
  StudentTodo("task5 ShardedStep (reduce-scatter, shard step, all-gather)", "docs/handout/part5.md, section 'Task 5'");
}

}  // namespace distlm::task5
