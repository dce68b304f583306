// Task 2b: your code goes here. Read docs/handout/part2.md first.
#include "task2b/grad_sync.h"

#include "common/runtime/errors.h"

namespace distlm::task2b {

void SyncGradients(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters) {
  // TODO(student): for every parameter, all_reduce its .grad with c10d::ReduceOp::SUM
  // (pg.allreduce takes a std::vector<torch::Tensor> and c10d::AllreduceOptions), wait for
  // the returned Work, and divide the result by the number of ranks (pg.getSize()).
  StudentTodo("task2b SyncGradients (all_reduce)", "docs/handout/part2.md, section 'Task 2b'");
}

}  // namespace distlm::task2b
