// //task5/grading:mutant_stage -- task 5's stage with the grader's sharded step carrying one
// deliberate mistake, chosen by --mutation (mutant_step.h). The grader runs the mistakes
// (task5/grading/grading.cc) to recognise a submission's by its trace; the grading suite grades
// each as a task 5 submission and checks its message.
//
// Grader-private, as all of grading/: --mutation=zero_none is the reference.
#include <algorithm>
#include <string>

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"
#include "common/train/run_stage.h"
#include "grading/mutation_flag.h"
#include "part1/train_step.h"
#include "task5/grading/mutant_step.h"
#include "task5/sharded_step.h"
#include "task5/zero_stage.h"

ABSL_FLAG(std::string, mutation, "zero_none", "zero_none (correct), or a mistake of task5/grading/mutant_step.h");

int main(int argc, char** argv) {
  // The step is built before RunStageMain parses the flags.
  const std::string mutation = distlm::grading::FlagFromArgv(argc, argv, "--mutation", "zero_none");
  const auto& known = distlm::task5::ZeroMutations();
  if (std::find(known.begin(), known.end(), mutation) == known.end()) {
    return distlm::RunMain([&]() -> int {
      throw distlm::UserError("--mutation=" + mutation + " is not a known mistake of task 5 (task5/grading/mutant_step.h)");
    });
  }
  distlm::task5::ZeroMutation() = mutation;
  return distlm::train::RunStageMain(
      argc, argv, distlm::task5::MakeZeroStage("mutant", distlm::part1::MakeTrainStep(), distlm::task5::ShardedStep));
}
