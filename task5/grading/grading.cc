// Task 5's grading (grading/stage_grading.h): its own known mistakes, run by its own mutant
// (mutant_stage.cc: the reference update with one mistake), and the messages that name them.
#include <string>
#include <vector>

#include "grading/stage_grading.h"
#include "grading/trace.h"

namespace distlm::task5 {
namespace {

using grading::Fmt;
using grading::KnownMistake;
using grading::Times;
using grading::Trace;

class Task5Grading : public grading::StageGrading {
 public:
  std::vector<std::string> OwnMistakes() const override {
    return {"zero_no_allgather", "zero_wrong_shard", "zero_local_norm"};
  }
  std::string MutantBinary() const override { return "task5/grading/mutant_stage"; }
  std::string Diagnose(const Trace& got, const Trace& want, const std::vector<KnownMistake>& own) const override {
    for (const auto& km : own) {
      if (!grading::Matches(got, km)) continue;
      if (km.mutation == "zero_no_allgather") {
        return "your ranks never share their updated shards: each rank's step changes only its own block of the "
               "parameters, and without the all-gather every rank keeps the old values of all the others (your "
               "losses match exactly that mistake). After opt.StepShard(), zero::AllGather opt.param_shard() into "
               "opt.flat_params().";
      }
      if (km.mutation == "zero_wrong_shard") {
        return "each rank steps its parameters with another rank's block of the gradient: your losses match a "
               "run whose gradient shard is taken at the next rank's offset. Rank r owns elements [r*S, (r+1)*S) "
               "of the flat buffers (S = opt.layout().shard_numel()); its grad_shard must be that block of the "
               "averaged gradient, as zero::ReduceScatterSum gives it.";
      }
      if (km.mutation == "zero_local_norm") {
        return "you clip by the norm of this rank's shard only: the gradient norm before clipping (" +
               Fmt("%.4f", got.grad_norms[0]) + ", " + Times(got.grad_norms[0], want.grad_norms[0]) +
               " the norm of the whole gradient) must be the norm of the whole gradient, the square root of the sum over ranks of the squared "
               "shard norms (opt.ClipGradShard(pg, max_grad_norm) all-reduces them), and every rank must scale by "
               "the same coefficient.";
      }
    }
    return "";
  }
};

DISTLM_STAGE_GRADING("task5", Task5Grading);

}  // namespace
}  // namespace distlm::task5
