// //task8/grading:mutant_stage -- task 8's stage with the grader's outer loop carrying one
// deliberate mistake, chosen by --mutation (BUILD's OUTER_MUTATIONS: the reference file with one
// change each). The grader runs outer_none, the reference, for the stage's own tests; the grading
// suite grades each mistake as a task 8 submission and checks its message.
//
// Grader-private, as all of grading/.
#include <cstdlib>
#include <map>
#include <string>

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"
#include "common/train/run_stage.h"
#include "grading/mutation_flag.h"
#include "part1/train_step.h"
#include "task8/local_sgd_stage.h"
#include "task8/outer_loop.h"

ABSL_FLAG(std::string, mutation, "outer_none", "outer_none (the reference), or a mistake of task8/grading/BUILD");

// Each mistake's MakeOuterLoop, in the namespace its generated file puts it in.
#define DISTLM_OUTER_MUTATIONS(X) \
  X(outer_wrong_sign)             \
  X(outer_not_divided)            \
  X(outer_from_own_params)        \
  X(outer_momentum_not_kept)      \
  X(outer_no_error_feedback)      \
  X(outer_int8_as_float32)        \
  X(outer_state_not_shared)       \
  X(outer_error_kept_on_failure)

#define DISTLM_DECLARE_OUTER_MUTATION(m)                                                               \
  namespace distlm::task8::m {                                                                         \
  std::unique_ptr<OuterLoop> MakeOuterLoop(const OuterOptimizerOptions& options, Compression compression); \
  }
DISTLM_OUTER_MUTATIONS(DISTLM_DECLARE_OUTER_MUTATION)

int main(int argc, char** argv) {
  // The outer loop is chosen before RunStageMain parses the flags.
  const std::string mutation = distlm::grading::FlagFromArgv(argc, argv, "--mutation", "outer_none");
  std::map<std::string, distlm::task8::OuterLoopFactory> known = {{"outer_none", distlm::task8::MakeOuterLoop}};
  // A forgery of 8c's scene, with the reference outer loop: the rank told to die lives on, and a
  // joiner ends at once, as a submission's static initializer could make them.
  if (mutation == "outer_kill_dodged") {
    unsetenv("DISTLM_FAULT_KILL");
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--join") return 0;
    }
    known[mutation] = distlm::task8::MakeOuterLoop;
  }
#define DISTLM_KNOW_OUTER_MUTATION(m) known[#m] = distlm::task8::m::MakeOuterLoop;
  DISTLM_OUTER_MUTATIONS(DISTLM_KNOW_OUTER_MUTATION)
  const auto it = known.find(mutation);
  if (it == known.end()) {
    return distlm::RunMain([&]() -> int {
      throw distlm::UserError("--mutation=" + mutation + " is not a known mistake of task 8 (task8/grading/BUILD)");
    });
  }
  return distlm::train::RunStageMain(argc, argv, distlm::task8::MakeLocalSgdStage(distlm::part1::MakeTrainStep(), it->second));
}
