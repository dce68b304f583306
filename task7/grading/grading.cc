// Task 7's grading (grading/stage_grading.h): the main run is the tiny BERT split over the row's
// model_parallel ranks (2: its 2 heads), each reading the whole batch. Its own known mistakes
// (mutant_stage.cc) and their messages; the data-parallel ones of grading/diagnosis.cc do not
// apply to ranks that share one replica, so a trace that matches none is explained here too.
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/stage_grading.h"
#include "grading/trace.h"

namespace distlm::task7 {
namespace {

using grading::Fmt;
using grading::KnownMistake;
using grading::Trace;

std::string Ranks() { return std::to_string(stages::Get("task7").grading.model_parallel); }

// The tiny BERT's norms move by a fraction of a percent under these mistakes: the relative
// difference says more than a ratio that rounds to 1.
std::string NormSays(const Trace& got, const Trace& want) {
  return "your gradient norm of update 1 (before clipping) is " + Fmt("%.6f", got.grad_norms[0]) + ", " +
         Fmt("%.1e", grading::RelDiff(got.grad_norms[0], want.grad_norms[0])) + " relative off the whole model's";
}

class Task7Grading : public grading::StageGrading {
 public:
  std::vector<std::string> OwnMistakes() const override {
    return {"tp_f_no_backward", "tp_g_no_reduce", "tp_g_backward_reduced", "tp_bias_per_rank"};
  }
  std::string MutantBinary() const override { return "task7/grading/mutant_stage"; }

  std::string Diagnose(const Trace& got, const Trace& want, const std::vector<KnownMistake>& own) const override {
    for (const auto& km : own) {
      if (!grading::Matches(got, km)) continue;
      if (km.mutation == "tp_g_no_reduce") {
        return "the row-parallel products are never summed over the ranks: your losses match a run whose g "
               "(ReduceFromTensorParallel) returns its input, so each rank goes on with its own partial product "
               "x_r W_r^T. g must all-reduce (sum) its input over the group in forward.";
      }
      if (km.mutation == "tp_bias_per_rank") {
        return "the bias of every row-parallel linear ends up in the sum " + Ranks() +
               " times: your losses match a run in which each rank adds the whole bias to its partial product "
               "before g (update 1's loss agrees only because BERT's biases start at zero). Sum the partial "
               "products first, then add the bias once.";
      }
      if (km.mutation == "tp_f_no_backward") {
        return "f (CopyToTensorParallel) does not sum the gradient in backward: " + NormSays(got, want) +
               ", and your losses match a run whose f is the plain identity. Every rank's slice of a "
               "column-parallel output depends on the whole input, so the input's gradient is the sum of the "
               "ranks' contributions: f's backward must all-reduce it, or the layers before (LayerNorm, "
               "embeddings) train on this rank's share only.";
      }
      if (km.mutation == "tp_g_backward_reduced") {
        return "g (ReduceFromTensorParallel) sums the gradient in backward as well: " + NormSays(got, want) +
               ", and your losses match a run whose g all-reduces in both directions. The sum's gradient "
               "reaches every partial product unchanged: g's backward is the identity (f's is the all-reduce).";
      }
    }
    if (grading::RelDiff(got.losses[0], want.losses[0]) > grading::kParityTol) {
      return "the very first loss (computed before any optimizer step) already differs: the split model's "
             "forward is not the whole model's. A column-parallel linear computes this rank's output features "
             "from the whole input (f(x) W_r^T + b_r); a row-parallel one sums the ranks' partial products "
             "x_r W_r^T with g, once, and adds the whole bias once after the sum.";
    }
    if (!got.grad_norms.empty() && grading::RelDiff(got.grad_norms[0], want.grad_norms[0]) > grading::kParityTol) {
      return "the forward matches (update 1's loss) but the backward does not: " + NormSays(got, want) +
             ". f's backward sums the input's gradient over the ranks; g's passes the gradient through "
             "unchanged.";
    }
    return "";
  }
};

DISTLM_STAGE_GRADING("task7", Task7Grading);

}  // namespace
}  // namespace distlm::task7
