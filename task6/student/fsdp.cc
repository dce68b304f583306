// Task 6: your code goes here. Read docs/handout/part6.md first, and the contract in
// task6/fsdp.h. Check your work with: bazel test //task6:student_test
#include "task6/fsdp.h"

#include "common/runtime/errors.h"

namespace distlm::task6 {

void GatherUnit(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  // TODO(student): see the contract in task6/fsdp.h.
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

// ---- 6b ----

c10::intrusive_ptr<c10d::Work> StartGather(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  // TODO(student): GatherUnit's all-gather, launched and returned, not waited for.
  StudentTodo("task6 StartGather (launch a unit's all-gather)",
              "docs/handout/part6.md, section 'Task 6b: prefetch'");
}

int UnitToPrefetch(int u, Pass pass, int num_units) {
  // TODO(student): see the contract in task6/fsdp.h.
  StudentTodo("task6 UnitToPrefetch (which unit to gather ahead)",
              "docs/handout/part6.md, section 'Task 6b: prefetch'");
}

// ---- 6c ----

PendingReduceScatter StartReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  // TODO(student): launch the reduce-scatter of unit.full_grad(); keep what Finish will need.
  StudentTodo("task6 StartReduceScatter (launch a unit's reduce-scatter)",
              "docs/handout/part6.md, section 'Task 6c: the reduce-scatter behind backward'");
}

void FinishReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit, PendingReduceScatter& pending) {
  // TODO(student): wait, then add this rank's block of the average to grad_shard(); free the rest.
  StudentTodo("task6 FinishReduceScatter (finish a unit's reduce-scatter)",
              "docs/handout/part6.md, section 'Task 6c: the reduce-scatter behind backward'");
}

double ShardedStep(c10d::ProcessGroup& pg, FsdpModel& model, double max_grad_norm) {
  // TODO(student): see the contract in task6/fsdp.h.
  StudentTodo("task6 ShardedStep (clip by the global norm, step the shards)",
              "docs/handout/part6.md, section 'The step'");
}

}  // namespace distlm::task6
