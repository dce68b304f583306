// Task 7b: your code goes here. Read docs/handout/part7.md first, and the contract in
// task7/pipeline_schedule.h. Check your work with: bazel test //task7:pipeline_student_test
#include "task7/pipeline_schedule.h"

#include "common/runtime/errors.h"

namespace distlm::task7 {

std::vector<PipelineStep> StageSteps(PipelineSchedule schedule, int stages, int stage, int micro_batches) {
  // TODO(student): stage `stage`'s forwards and backwards in the order it runs them, with the
  // properties task7/pipeline_schedule.h gives each schedule.
  StudentTodo("task7 StageSteps (a pipeline stage's schedule)", "docs/handout/part7.md, section 'Task 7b'");
}

}  // namespace distlm::task7
