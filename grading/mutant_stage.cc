// //grading:mutant_stage -- a task 2 stage with a deliberately wrong gradient synchronisation,
// chosen by --mutation. The grading suite checks that each of these is caught, with a message
// that tells a student what went wrong.
#include <string>

#include "absl/flags/flag.h"
#include "common/train/distributed.h"

ABSL_FLAG(std::string, mutation, "none",
          "none (correct all_reduce average), no_sync, sum_without_average");

namespace {

void AllreduceSum(c10d::ProcessGroup& pg, const torch::Tensor& grad) {
  std::vector<torch::Tensor> t = {grad};
  pg.allreduce(t)->wait();
}

void Sync(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& params) {
  const std::string m = absl::GetFlag(FLAGS_mutation);
  if (m == "no_sync") return;
  for (const auto& p : params) {
    AllreduceSum(pg, p.grad());
    if (m != "sum_without_average") p.grad().div_(pg.getSize());
  }
}

}  // namespace

int main(int argc, char** argv) { return distlm::train::RunGradientSyncStage(argc, argv, "mutant", Sync); }
