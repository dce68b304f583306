// //task5/grading:mutant_stage -- task 5's stage with the reference update (task5/reference/
// sharded_step.cc) carrying one deliberate mistake, chosen by --mutation. The grader runs the
// mistakes (task5/grading/grading.cc) to recognise a submission's by its trace; the grading
// suite grades each as a task 5 submission and checks its message.
//
// Grader-private, as all of grading/: --mutation=zero_none is a correct sharded step.
#include <cmath>
#include <string>

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"
#include "common/train/run_stage.h"
#include "grading/mutation_flag.h"
#include "part1/train_step.h"
#include "task5/grading/collectives.h"
#include "task5/zero_stage.h"

ABSL_FLAG(std::string, mutation, "zero_none",
          "zero_none (correct), zero_no_allgather, zero_wrong_shard, zero_local_norm");

namespace {

const char* const kMutations[] = {"zero_none", "zero_no_allgather", "zero_wrong_shard", "zero_local_norm"};

// The reference update with mistake `m` (none for zero_none).
double ZeroStep(const std::string& m, c10d::ProcessGroup& pg, distlm::zero::ShardedAdamW& opt, double max_norm) {
  const int64_t S = opt.layout().shard_numel();
  if (m == "zero_wrong_shard") {
    // The all_reduce + slice fallback with the slice at the next rank's offset: every rank
    // steps its parameters with another block's gradient.
    std::vector<torch::Tensor> t = {opt.flat_grad()};
    pg.allreduce(t)->wait();
    opt.grad_shard().copy_(opt.flat_grad().narrow(0, ((pg.getRank() + 1) % pg.getSize()) * S, S));
  } else {
    distlm::zero::ReduceScatterSum(pg, opt.flat_grad(), opt.grad_shard());
  }
  opt.grad_shard().div_(pg.getSize());
  double norm = 0;
  if (m == "zero_local_norm") {
    // Clipping by this rank's shard alone: each rank scales by its own coefficient.
    norm = std::sqrt(opt.ShardSquaredNorm());
    opt.ScaleGradShard(norm, max_norm);
  } else {
    norm = opt.ClipGradShard(pg, max_norm);
  }
  opt.StepShard();
  // zero_no_allgather: each rank keeps the old values of every shard but its own.
  if (m != "zero_no_allgather") distlm::zero::AllGather(pg, opt.param_shard(), opt.flat_params());
  return norm;
}

}  // namespace

int main(int argc, char** argv) {
  // The step is built before RunStageMain parses the flags (it checks that absl parsed the same).
  const std::string mutation = distlm::grading::FlagFromArgv(argc, argv, "--mutation", "zero_none");
  bool known = false;
  for (const char* k : kMutations) known = known || mutation == k;
  if (!known) {
    return distlm::RunMain([&]() -> int {
      throw distlm::UserError("--mutation=" + mutation +
                              " is not one of zero_none, zero_no_allgather, zero_wrong_shard, zero_local_norm");
    });
  }
  return distlm::train::RunStageMain(
      argc, argv,
      distlm::task5::MakeZeroStage("mutant", distlm::part1::MakeTrainStep(),
                                   [mutation](c10d::ProcessGroup& pg, distlm::zero::ShardedAdamW& opt, double max_norm) {
                                     if (absl::GetFlag(FLAGS_mutation) != mutation) {
                                       throw distlm::UserError("--mutation: could not read its value before the flags were parsed");
                                     }
                                     return ZeroStep(mutation, pg, opt, max_norm);
                                   }));
}
