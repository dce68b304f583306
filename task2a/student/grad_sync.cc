// Task 2a: your code goes here. Read docs/handout/part2.md first.
#include "task2a/grad_sync.h"

#include "common/runtime/errors.h"

namespace distlm::task2a {

void SyncGradients(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters) {
  // TODO(student): every parameter's .grad the average over all ranks, through rank 0, with
  // pg.gather (c10d::GatherOptions) and pg.scatter (c10d::ScatterOptions); the handout shows
  // their arguments. Each call returns a Work: the result is there only after ->wait().
  // One gather per parameter works; one flat buffer (torch::cat) is much faster. Why?
  StudentTodo("task2a SyncGradients (gather + scatter)", "docs/handout/part2.md, section 'Task 2a'");
}

}  // namespace distlm::task2a
