// Task 2b reference solution.
//
// One all_reduce per parameter, in place on .grad: the simplest correct code, and what the
// handout asks students to measure against task 2a and task 3. All of them are started before
// any is waited on, so the backend can pipeline them; task 3 (DDP) goes further and groups
// them into buckets that start while backward is still running.
#include "task2b/grad_sync.h"

namespace distlm::task2b {

void SyncGradients(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters) {
  std::vector<std::vector<torch::Tensor>> tensors;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  tensors.reserve(parameters.size());
  for (const auto& p : parameters) {
    tensors.push_back({p.grad()});
    works.push_back(pg.allreduce(tensors.back()));  // SUM, c10d's default
  }
  for (size_t i = 0; i < works.size(); ++i) {
    works[i]->wait();
    tensors[i][0].div_(pg.getSize());
  }
}

}  // namespace distlm::task2b
