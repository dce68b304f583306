// //task6/grading:mutant_stage -- task 6's stage with the grader's FSDP functions carrying one
// deliberate mistake, chosen by --mutation (mutant_fsdp.h). The grader runs the mistakes that
// change the losses (grading.cc: OwnMistakes) to recognise a submission's by its trace; the
// grading suite grades them as task 6 submissions and checks what each loses, and with which
// message.
//
// Grader-private, as all of grading/: --mutation=fsdp_none is the reference.
#include <algorithm>
#include <string>

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"
#include "common/train/run_stage.h"
#include "grading/mutation_flag.h"
#include "part1/train_step.h"
#include "task6/fsdp_stage.h"
#include "task6/grading/mutant_fsdp.h"

ABSL_FLAG(std::string, mutation, "fsdp_none", "fsdp_none (correct), or a mistake of task6/grading/mutant_fsdp.h");

int main(int argc, char** argv) {
  const std::string mutation = distlm::grading::FlagFromArgv(argc, argv, "--mutation", "fsdp_none");
  const auto& known = distlm::task6::FsdpMutations();
  if (std::find(known.begin(), known.end(), mutation) == known.end()) {
    return distlm::RunMain([&]() -> int {
      throw distlm::UserError("--mutation=" + mutation + " is not a known mistake of task 6 (task6/grading/mutant_fsdp.h)");
    });
  }
  distlm::task6::FsdpMutation() = mutation;
  return distlm::train::RunStageMain(argc, argv,
                                     distlm::task6::MakeFsdpStage("task6", distlm::part1::MakeTrainStep()));
}
