// Task 8's grading (grading/stage_grading.h). Its workers train alone on their shards until a
// round ends, so its parity is one round of the grader's updates at outer lr 1 without momentum,
// held to part 1 on each shard (TrainsOnShardsAlone); its own tests hold DiLoCo's rounds and
// int8's to the grader's own run of the same flags (mutant_stage --mutation=outer_none), on 2
// workers, in rounds short enough that later updates start from earlier rounds' results.
#include <cmath>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/final_weights.h"
#include "grading/stage_grading.h"
#include "grading/text.h"
#include "grading/trace.h"

namespace distlm::task8 {
namespace {

using grading::FlagsSaid;
using grading::Fmt;
using grading::ReferenceOutcome;
using grading::StageCheckContext;
using grading::StageRun;
using grading::TestResult;

constexpr int kWorkers = 2;
// What a run of int8 rounds may send, in times the grader's own: an int8 per value and a float32
// per chunk of 256, gathered or passed along however the student likes, is near 1; float32 is 4.
constexpr double kInt8MostBytes = 1.5;

class Task8Grading : public grading::StageGrading {
 public:
  // One round of the grader's updates at outer lr 1 without momentum: local SGD, whose round ends
  // with the mean of what part 1 makes of each shard.
  std::vector<std::string> RunFlags(const std::string&) const override {
    return {"--inner_steps=" + std::to_string(grading::kSteps), "--outer_lr=1", "--outer_momentum=0",
            "--outer_nesterov=false"};
  }
  bool TrainsOnShardsAlone() const override { return true; }
  std::string MutantBinary() const override { return "task8/grading/mutant_stage"; }
  std::string ReferenceMutation() const override { return "outer_none"; }

  std::string ExplainStep(double along, int ranks) const override {
    const std::string moved = "your outer step moved the parameters " + Fmt("%.2f", along) +
                              " times the way the workers moved on average in the round (at outer lr 1 without momentum "
                              "it must be 1: the round ends at their mean)";
    if (std::fabs(along + 1) < 0.05) return moved + ": the opposite way. Check the sign of your pseudo-gradient and of the step";
    if (std::fabs(along - ranks) < 0.05 * ranks) {
      return moved + ": " + std::to_string(ranks) + " workers' worth, their sum rather than their mean";
    }
    if (std::fabs(along) < 0.05) return moved + ": they end where the round started";
    return moved;
  }

  std::vector<TestResult> ExtraTests(const StageRun&, const StageCheckContext& c) const override {
    std::vector<TestResult> out = grading::OwnTests(*stages::Find("task8"));
    // DiLoCo's outer optimizer over three rounds (2, 2, 1 updates): its momentum carries.
    Judge(c, {"--inner_steps=2", "--outer_lr=0.7", "--outer_momentum=0.9", "--outer_nesterov=true"},
          "the outer optimizer's state: momentum 0.9 with Nesterov, carried from round to round as torch.optim.SGD "
          "carries it from step to step",
          {"outer_momentum_not_kept", "a run whose momentum buffer starts again every round"}, false, &out[0]);
    // int8 alone (local SGD's outer step, which the parity test credits) over five rounds of one
    // update: from the second on, what earlier messages missed travels too.
    Judge(c, {"--inner_steps=1", "--outer_lr=1", "--outer_momentum=0", "--outer_nesterov=false", "--compression=int8"},
          "int8 rounds: each message dequantized as int8_exchange.h says, and what a worker's message missed added "
          "to what it sends next round (the error feedback)",
          {"outer_no_error_feedback", "a run that drops what each message missed instead of sending it next round"},
          true, &out[1]);
    return out;
  }

 private:
  // A known mistake of this test: the grader's mutant (BUILD's OUTER_MUTATIONS) and what it does.
  struct Mistake {
    std::string mutation;
    std::string what;
  };

  static void Judge(const StageCheckContext& c, const std::vector<std::string>& flags, const std::string& what,
                    const Mistake& mistake, bool int8, TestResult* t) {
    const std::string on = "your run with" + FlagsSaid(flags) + " on " + std::to_string(kWorkers) + " workers ";
    const StageRun r = c.run(kWorkers, flags, 0);
    if (!r.Completed(grading::kSteps)) {
      t->output = on + "did not complete: " + c.run_failure(r);
      return;
    }
    const ReferenceOutcome ref = c.reference_run ? c.reference_run(kWorkers, flags) : ReferenceOutcome{};
    if (ref.trace.losses.empty() || ref.model.empty()) {
      t->passed = true;
      t->score = t->max_score;
      t->output = "not checked: the grader's own run with" + FlagsSaid(flags) + " failed (credited)\n";
      return;
    }
    if (int8 && ref.bytes > 0 && r.network_bytes >= 0 && r.network_bytes > kInt8MostBytes * ref.bytes) {
      t->output = on + "sent " + Fmt("%.2f", r.network_bytes / 1e6) + " MB over loopback, " +
                  Fmt("%.1f", r.network_bytes / ref.bytes) + " times what the grader's own int8 run sent (the " +
                  "kernel's count): your pseudo-gradients did not travel as int8\n";
      return;
    }
    const std::string diff = grading::ParityDiff(ref.trace, grading::TraceOf(r), "the grader's own run");
    const grading::WeightsVerdict weights =
        grading::CheckFinalWeights(r, kWorkers, ref.model, "the grader's own run with" + FlagsSaid(flags));
    if (!diff.empty() || !weights.ok) {
      // The known mistake's run on the same flags, to name it where the submission ends as it does.
      std::vector<std::string> as_mistake = flags;
      as_mistake.push_back("--mutation=" + mistake.mutation);
      const ReferenceOutcome known = c.reference_run(kWorkers, as_mistake);
      const bool is_known = !known.model.empty() && grading::ParityDiff(known.trace, grading::TraceOf(r)).empty() &&
                            grading::CheckFinalWeights(r, kWorkers, known.model, "").ok;
      t->output = on + "does not end as the grader's own run of the same flags does" +
                  (is_known ? ": it ends as " + mistake.what + " does" : "") +
                  ". What this test checks beyond the parity test's one round at outer lr 1 is " + what + ".\n" +
                  (diff.empty() ? "" : diff + ".\n") + (weights.ok ? "" : weights.message + ".\n");
      return;
    }
    t->passed = true;
    t->score = t->max_score;
    t->output = on + "matches the grader's own run: the losses and gradient norms within " +
                Fmt("%.0e", grading::kParityTol) + " relative; " + weights.message +
                (int8 && ref.bytes > 0 && r.network_bytes > 0
                     ? "; sent " + Fmt("%.2f", r.network_bytes / ref.bytes) + " times the bytes of the grader's int8 run"
                     : "") +
                "\n";
  }
};

DISTLM_STAGE_GRADING("task8", Task8Grading);

}  // namespace
}  // namespace distlm::task8
