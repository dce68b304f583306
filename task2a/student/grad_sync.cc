// Task 2a: your code goes here. Read docs/handout/part2.md first.
#include "task2a/grad_sync.h"

#include "common/runtime/errors.h"

namespace distlm::task2a {

void SyncGradients(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters) {
  // TODO(student): make every parameter's .grad the average over all ranks, through rank 0:
  //   1. pg.gather(...) every rank's gradients to rank 0 (c10d::GatherOptions, rootRank 0);
  //      only rank 0 passes output tensors;
  //   2. on rank 0, average them;
  //   3. pg.scatter(...) the average back to every rank (c10d::ScatterOptions, rootRank 0);
  //   4. write what you received into each parameter's .grad.
  // Each call returns a Work: call ->wait() on it before using the result.
  // One gather per parameter works; one flat buffer (torch::cat) is much faster. Why?
  StudentTodo("task2a SyncGradients (gather + scatter)", "docs/handout/part2.md, section 'Task 2a'");
}

}  // namespace distlm::task2a
