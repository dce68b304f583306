// Task 6: your code goes here. Read docs/handout/part6.md first, and the contract in
// task6/fsdp.h. Check your work with: bazel test //task6:student_test
#include "task6/fsdp.h"

#include "common/runtime/errors.h"

namespace distlm::task6 {

void GatherUnit(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  // TODO(student): bytes for the full parameters, then every rank's block into them.
  StudentTodo("task6 GatherUnit (all-gather a unit's parameters)", "docs/handout/part6.md, section 'Gather'");
}

void ReshardUnit(FsdpUnit& unit) {
  // TODO(student): free the full parameters for real (autograd holds views of them).
  StudentTodo("task6 ReshardUnit (free a unit's full parameters)", "docs/handout/part6.md, section 'Reshard'");
}

void ReduceScatterGrad(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  // TODO(student): this rank's block of the averaged gradient, added to its shard; free the rest.
  StudentTodo("task6 ReduceScatterGrad (a unit's gradient into the shards)",
              "docs/handout/part6.md, section 'Reduce-scatter'");
}

double ShardedStep(c10d::ProcessGroup& pg, FsdpModel& model, double max_grad_norm) {
  // TODO(student): the global norm from every rank's part, clipping, the step of the shards.
  StudentTodo("task6 ShardedStep (clip by the global norm, step the shards)",
              "docs/handout/part6.md, section 'The step'");
}

}  // namespace distlm::task6
