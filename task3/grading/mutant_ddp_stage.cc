// //task3/grading:mutant_ddp_stage -- task 3's stage (task3/ddp_stage.cc) over the grader's DDP
// with one deliberate mistake (mutant_ddp.h), chosen by --ddp_mutation. The grading suite grades
// it as a task 3 submission and checks that each mistake loses its points with its own message
// (grading/README.md, "The mutation suite").
//
// Grader-private, as grading/mutant_stage.cc: with --ddp_mutation=none it is a correct DDP.
#include <string>

#include "absl/flags/flag.h"
#include "common/train/run_stage.h"
#include "grading/mutation_flag.h"
#include "part1/train_step.h"
#include "task3/ddp_stage.h"
#include "task3/grading/mutant_ddp.h"

ABSL_FLAG(std::string, ddp_mutation, "none",
          "none (a correct DDP); the mistakes: launch_at_finish (no all-reduce before backward ends), "
          "forward_order (buckets filled from the first parameter), no_division (the sum, not the mean), "
          "ignore_no_sync (communicates in every backward), silent_unused (no error for a parameter "
          "without a gradient)");

int main(int argc, char** argv) {
  // The DDP is made after the flags are parsed; the value is the flag's, read here first.
  distlm::task3::DdpMutation() = distlm::grading::FlagFromArgv(argc, argv, "--ddp_mutation", "none");
  return distlm::train::RunStageMain(argc, argv, distlm::task3::MakeDdpStage("task3", distlm::part1::MakeTrainStep()));
}
