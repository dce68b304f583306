// //task7/grading:mutant_stage -- task 7's stage with the reference (task7/reference/
// tensor_parallel.cc, under the names of reference_tensor_parallel.h) carrying one deliberate
// mistake, chosen by --mutation. The grader runs them (grading.cc: OwnMistakes) to recognise a
// submission's by its trace; the grading suite grades every one as a task 7 submission and
// checks what it loses, and with which message.
//
// Grader-private, as all of grading/: --mutation=tp_none is the reference.
#include <torch/nn/functional/linear.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"
#include "common/train/run_stage.h"
#include "grading/mutation_flag.h"
#include "part1/train_step.h"
#include "task7/grading/mutants.h"
#include "task7/model_parallel_stage.h"

ABSL_FLAG(std::string, mutation, "tp_none",
          "tp_none (correct), tp_f_no_backward, tp_g_no_reduce, tp_g_backward_reduced, tp_bias_per_rank; 7c's "
          "dp_no_average, dp_sum_not_mean, mesh_coordinates_swapped; 7b's pp_loss_last_only, pp_no_grad_back, "
          "pp_input_without_grad, pp_1f1b_warmup_too_long, pp_afab_logged_as_1f1b, pp_recompute_logged_as_1f1b");

namespace distlm::task7 {
namespace {

// What a submission can do to its own log: every "pipeline_in_flight_peak":N made 2.
void ForgeInFlightPeak(const std::string& output_dir) {
  const std::string path = output_dir + "/train_log.jsonl";
  std::ifstream in(path, std::ios::binary);
  if (!in) return;
  const std::string log((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const std::regex peak("\"pipeline_in_flight_peak\":[0-9]+");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << std::regex_replace(log, peak, "\"pipeline_in_flight_peak\":2");
}

}  // namespace
}  // namespace distlm::task7

int main(int argc, char** argv) {
  const std::string mutation = distlm::grading::FlagFromArgv(argc, argv, "--mutation", "tp_none");
  bool known = false;
  std::string names;
  for (size_t i = 0; i < distlm::task7::kMutationCount; ++i) {
    const char* k = distlm::task7::kMutations[i];
    known = known || mutation == k;
    names += (names.empty() ? "" : ", ") + std::string(k);
  }
  if (!known) {
    return distlm::RunMain([&]() -> int { throw distlm::UserError("--mutation=" + mutation + " is not one of " + names); });
  }
  distlm::task7::Mutation() = mutation;
  const int code = distlm::task7::RunModelParallelMain(argc, argv, "task7", distlm::part1::MakeTrainStep());
  const char* rank = std::getenv("RANK");  // rank 0 writes the log (tools/launch sets RANK)
  if ((mutation == "pp_afab_logged_as_1f1b" || mutation == "pp_recompute_logged_as_1f1b") &&
      (rank == nullptr || std::string(rank) == "0")) {
    distlm::task7::ForgeInFlightPeak(distlm::grading::FlagFromArgv(argc, argv, "--output_dir", "."));
  }
  return code;
}
