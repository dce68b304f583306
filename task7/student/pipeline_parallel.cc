// Task 7b: your code goes here. Read docs/handout/part7.md first, and the contract in
// task7/pipeline_parallel.h. Check your work with: bazel test //task7:pipeline_student_test
#include "common/runtime/errors.h"
#include "task7/pipeline_parallel.h"

namespace distlm::task7 {

double RunPipelineSteps(const PipelineStage& stage, const std::vector<PipelineStep>& steps) {
  // TODO(student): for each step in order, a forward (receive the input from stage - 1, run
  // stage.forward, send the output to stage + 1) or a backward (receive the output's gradient
  // from stage + 1, run stage.backward, send the input's gradient to stage - 1). Keep each
  // micro-batch's input and output from its forward to its backward, and wait for every send
  // before returning.
  StudentTodo("task7 RunPipelineSteps", "docs/handout/part7.md, section 'Task 7b'");
}

}  // namespace distlm::task7
