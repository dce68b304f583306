// Task 7b reference: the two schedules as lists of steps.
#include <algorithm>
#include <stdexcept>

#include "task7/pipeline_schedule.h"

namespace distlm::task7 {

std::vector<PipelineStep> StageSteps(PipelineSchedule schedule, int stages, int stage, int micro_batches) {
  if (stages < 1 || micro_batches < 1 || stage < 0 || stage >= stages) {
    throw std::invalid_argument("a pipeline of " + std::to_string(stages) + " stages and " +
                                std::to_string(micro_batches) + " micro-batches has no stage " + std::to_string(stage));
  }
  std::vector<PipelineStep> steps;
  if (schedule == PipelineSchedule::kAllForwardAllBackward) {
    for (int k = 0; k < micro_batches; ++k) steps.push_back({true, k});
    for (int k = 0; k < micro_batches; ++k) steps.push_back({false, k});
    return steps;
  }
  const int warmup = std::min(stages - 1 - stage, micro_batches);
  int next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) steps.push_back({true, next_forward});
  while (next_forward < micro_batches) {  // steady state: one forward, then one backward
    steps.push_back({true, next_forward++});
    steps.push_back({false, next_backward++});
  }
  while (next_backward < micro_batches) steps.push_back({false, next_backward++});  // cool-down
  return steps;
}

}  // namespace distlm::task7
