// Task 6's reference solution (task6/reference/fsdp.cc) compiled under other names (BUILD's
// renamed_reference), for the mutant: task6/fsdp.h's functions with "Reference" in front.
// Grader-private, as every grading/ folder.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "task6/fsdp.h"

namespace distlm::task6 {

void ReferenceGatherUnit(c10d::ProcessGroup& pg, FsdpUnit& unit);
void ReferenceReshardUnit(FsdpUnit& unit);
void ReferenceReduceScatterGrad(c10d::ProcessGroup& pg, FsdpUnit& unit);
double ReferenceShardedStep(c10d::ProcessGroup& pg, FsdpModel& model, double max_grad_norm);
c10::intrusive_ptr<c10d::Work> ReferenceStartGather(c10d::ProcessGroup& pg, FsdpUnit& unit);
int ReferenceUnitToPrefetch(int u, Pass pass, int num_units);
PendingReduceScatter ReferenceStartReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit);
void ReferenceFinishReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit, PendingReduceScatter& pending);

}  // namespace distlm::task6
