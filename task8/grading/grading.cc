// Task 8's grading (grading/stage_grading.h). Its workers train alone on their shards until a
// round ends, so its parity is one round of the grader's updates at outer lr 1 without momentum,
// held to part 1 on each shard (TrainsOnShardsAlone); its own tests hold DiLoCo's rounds, int8's
// and 8c's (a worker lost, a joiner in its place) to the grader's own run of the same flags
// (mutant_stage --mutation=outer_none), in rounds short enough that later updates start from
// earlier rounds' results.
#include <cmath>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/final_weights.h"
#include "grading/stage_grading.h"
#include "grading/text.h"
#include "grading/trace.h"
#include "tools/launcher.h"

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
    Judge(c,
          {{"--inner_steps=2", "--outer_lr=0.7", "--outer_momentum=0.9", "--outer_nesterov=true"},
           "the outer optimizer's state: momentum 0.9 with Nesterov, carried from round to round as torch.optim.SGD "
           "carries it from step to step",
           {{"outer_momentum_not_kept", "a run whose momentum buffer starts again every round"}}},
          &out[0]);
    // int8 alone (local SGD's outer step, which the parity test credits) over five rounds of one
    // update: from the second on, what earlier messages missed travels too.
    Judge(c,
          {{"--inner_steps=1", "--outer_lr=1", "--outer_momentum=0", "--outer_nesterov=false", "--compression=int8"},
           "int8 rounds: each message dequantized as int8_exchange.h says, and what a worker's message missed added "
           "to what it sends next round (the error feedback)",
           {{"outer_no_error_feedback", "a run that drops what each message missed instead of sending it next round"}},
           /*bytes=*/true},
          &out[1]);
    // 8c: DiLoCo in int8 on 3 workers, rounds of 2. Rank 2 dies in update 3, so the survivors'
    // second round fails, is taken again between the two of them, and the joiner, waiting since
    // the start, is let in at its end with the outer state; the last round is the three's. Its
    // rounds are the two tests' above, so it is judged once they pass.
    if (!out[0].passed || !out[1].passed) {
      out[2].output = "not run: 8c's run is DiLoCo's rounds in int8 with a worker lost, so it is judged once the "
                      "DiLoCo and int8 tests pass\n";
      return out;
    }
    Judge(c,
          {{"--inner_steps=2", "--outer_lr=0.7", "--outer_momentum=0.9", "--outer_nesterov=true", "--compression=int8",
            "--elastic", "--dist_timeout_s=20"},
           "8c: an End called again after its collective threw (the survivors' round) and a joiner's rounds after "
           "LoadSharedState: from then on the others'",
           {{"outer_state_not_shared", "a run whose SharedState leaves out the outer optimizer's momentum"},
            {"outer_error_kept_on_failure", "a run whose End, failing, had already kept what its int8 message missed"}},
           /*bytes=*/false, /*workers=*/3, grading::LostWorker{2, 3}},
          &out[2]);
    return out;
  }

 private:
  // A known mistake of a test: the grader's mutant (BUILD's OUTER_MUTATIONS) and what it does.
  struct Mistake {
    std::string mutation;
    std::string what;
  };
  // One of the stage's own tests: a run with `flags` held to the grader's own run of them.
  struct Check {
    std::vector<std::string> flags;
    std::string what;               // what it checks beyond the parity test
    std::vector<Mistake> mistakes;  // tried, to name them, where the run ends as none should
    bool bytes = false;             // int8: the bytes held to the grader's int8 run's
    int workers = kWorkers;
    grading::LostWorker lost;       // 8c: a worker lost, and a joiner in its place
  };

  static void Judge(const StageCheckContext& c, const Check& k, TestResult* t) {
    const bool losing = k.lost.rank >= 0;
    const std::string said = FlagsSaid(k.flags);
    const std::string on = "your run with" + said + " on " + std::to_string(k.workers) + " workers" + k.lost.Said() + " ";
    // k.lost.rank -1 (no worker lost): the plain runs.
    auto reference = [&](const std::vector<std::string>& flags) {
      return c.reference_run_losing ? c.reference_run_losing(k.workers, flags, k.lost) : ReferenceOutcome{};
    };
    StageRun r = c.run_losing(k.workers, k.flags, k.lost);
    // A scene of deadlines (a lost worker is found by its silence) on a busy host: a run that
    // did not complete gets a second try, and the test says so.
    std::string first_try;
    if (losing && !r.Completed(grading::kSteps)) {
      first_try = "(a first try did not complete and was run again: " + c.run_failure(r) + ")\n";
      r = c.run_losing(k.workers, k.flags, k.lost);
    }
    if (!r.Completed(grading::kSteps)) {
      t->output = on + "did not complete" + (first_try.empty() ? "" : ", twice") + ": " + c.run_failure(r);
      return;
    }
    // The scene, as the grader's launcher saw it from outside the ranks (its own lines carry no
    // "[rank R]" prefix): the rank died, and its joiner took its place.
    if (losing) {
      const std::string died = tools::JoinerTakesPlaceLine(k.lost.rank, "was killed by signal 9 (SIGKILL)");
      if (r.output.find("\n" + died) == std::string::npos) {
        t->output = on + "ended without the scene this test sets: the grader's launcher never said '" + died +
                    "'. Rank " + std::to_string(k.lost.rank) + " is killed by the given trainer (DISTLM_FAULT_KILL), " +
                    "which your code must leave alone\n";
        return;
      }
    }
    const ReferenceOutcome ref = reference(k.flags);
    if (ref.trace.losses.empty() || ref.model.empty()) {
      t->passed = true;
      t->score = t->max_score;
      t->output = "not checked: the grader's own run with" + said + " failed (credited)\n";
      return;
    }
    if (k.bytes && ref.bytes > 0 && r.network_bytes >= 0 && r.network_bytes > kInt8MostBytes * ref.bytes) {
      t->output = on + "sent " + Fmt("%.2f", r.network_bytes / 1e6) + " MB over loopback, " +
                  Fmt("%.1f", r.network_bytes / ref.bytes) + " times what the grader's own int8 run sent (the " +
                  "kernel's count): your pseudo-gradients did not travel as int8\n";
      return;
    }
    const std::string diff = grading::ParityDiff(ref.trace, grading::TraceOf(r), "the grader's own run");
    const grading::WeightsVerdict weights =
        grading::CheckFinalWeights(r, k.workers, ref.model, "the grader's own run with" + said);
    if (!diff.empty() || !weights.ok) {
      // The known mistakes' runs on the same flags, to name the one the submission ends as.
      std::string known_as;
      for (const Mistake& m : k.mistakes) {
        std::vector<std::string> as_mistake = k.flags;
        as_mistake.push_back("--mutation=" + m.mutation);
        const ReferenceOutcome known = reference(as_mistake);
        if (!known.trace.losses.empty() && grading::ParityDiff(known.trace, grading::TraceOf(r)).empty() &&
            grading::RankZeroMatches(r, known.model)) {
          known_as = ": it ends as " + m.what + " does";
          break;
        }
      }
      t->output = on + "does not end as the grader's own run of the same flags does" + known_as +
                  ". What this test checks beyond the parity test's one round at outer lr 1 is " + k.what + ".\n" +
                  (diff.empty() ? "" : diff + ".\n") + (weights.ok ? "" : weights.message + ".\n") + first_try;
      return;
    }
    t->passed = true;
    t->score = t->max_score;
    t->output = on + "matches the grader's own run: the losses and gradient norms within " +
                Fmt("%.0e", grading::kParityTol) + " relative; " + weights.message +
                (k.bytes && ref.bytes > 0 && r.network_bytes > 0
                     ? "; sent " + Fmt("%.2f", r.network_bytes / ref.bytes) + " times the bytes of the grader's int8 run"
                     : "") +
                "\n" + first_try;
  }
};

DISTLM_STAGE_GRADING("task8", Task8Grading);

}  // namespace
}  // namespace distlm::task8
