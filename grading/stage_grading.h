// What the grader knows of a stage beyond its row in common/stages/stages.bzl: the flags its
// runs add, its own known mistakes and their messages, and its tests beyond build, run, parity
// and collectives. A stage whose row says `grading = True` implements StageGrading in its
// folder's grading/ package (private: the student kit leaves every grading/ folder out) and
// registers it with DISTLM_STAGE_GRADING; the grader (grading/autograder.cc, diagnosis.cc) calls
// it and names no stage. A stage without one gets the defaults: nothing particular.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/overlap_check.h"
#include "grading/share_check.h"
#include "grading/stage_runner.h"
#include "grading/test_result.h"
#include "grading/trace.h"

namespace distlm::grading {

// A run of the grader's own mutant (a known mistake), to name the mistake a failing trace
// matches.
struct KnownMistake {
  std::string mutation;  // the mutant's --mutation
  Trace trace;
};

// Whether `got` is the known mistake's run: its losses and first gradient norm within
// kMistakeTol (the test the generic diagnosis and every stage's own apply).
inline bool Matches(const Trace& got, const KnownMistake& mistake) {
  return Close(got.losses, mistake.trace.losses, kSteps, kMistakeTol) &&
         Close(got.grad_norms, mistake.trace.grad_norms, 1, kMistakeTol);
}

// The flags of the share check's runs (grading/share_check.h), after a layout's own: long
// sequences, and updates enough that training rather than start-up is most of a rank's CPU time
// (at 5 updates start-up is a third of it; at 10 the whole batch on one process takes 2.0 times
// a data-parallel rank's CPU time instead of 1.7, measured).
inline std::vector<std::string> ShareRunFlags() { return {"--max_seq_length=512", "--max_steps=10"}; }

// The share check's verdict on one layout (grading/share_check.h): not ok, `message` says why
// the test is not credited; ok, what was measured (or why it was not judged).
struct ShareOutcome {
  bool ok = true;
  std::string message;
};

// The grader's own reference run of a layout, as a stage's own tests compare with it.
struct ReferenceOutcome {
  Trace trace;
  std::string model;
  double bytes = -1;
};

// What a stage's own tests may use of this grading.
struct StageCheckContext {
  int ranks = 4;                     // of the main run
  std::string model_type = "bert";   // the grader's --model_type
  const Trace* expected = nullptr;   // the grader's single-node trace
  // Runs the submission's binary on `ranks` ranks with the grader's flags plus `extra` (which
  // override them), within timeout_s (0: the grader's limit).
  std::function<StageRun(int ranks, const std::vector<std::string>& extra, double timeout_s)> run;
  // Why a completed trace differs from the single-node one (known mistakes, then heuristics).
  std::function<std::string(const Trace& got)> diagnose;
  // What went wrong in a run that did not complete.
  std::function<std::string(const StageRun& run)> run_failure;
  // "" when what the run (on `ranks` ranks, with the stage's flags and `extra`) sent over the
  // network can carry what it logged (traffic_check.h), else why not. Null: not checked.
  std::function<std::string(const StageRun& run, int ranks, const std::vector<std::string>& extra)> traffic;
  // "" when every rank of the run ended with the grader's weights (final_weights.h), else why
  // not. Null: not checked.
  std::function<std::string(const StageRun& run, int ranks)> final_weights;
  // The grader's own reference run (StageGrading::ReferenceMutation) on `ranks` ranks with the
  // stage's flags and `extra`, counted as a graded run's is (share_check.h's figures: its busiest
  // process's, and the whole run's from its control group); -1 each: not measured. `again`: run
  // anew, not the figures of an earlier run of the layout. Null: the stage has no reference run.
  std::function<ShareFigures(int ranks, const std::vector<std::string>& extra, bool again)> reference_figures;
  // The same run's trace, rank 0's model.safetensors (its bytes; "": not saved) and the bytes it
  // sent over the network (-1: not counted); an empty trace: the run failed.
  std::function<ReferenceOutcome(int ranks, const std::vector<std::string>& extra)> reference_run;
  // Task 8c's runs: `run` (no time limit of its own) and `reference_run` with a worker lost and
  // a joiner in its place (stage_runner.h's LostWorker; rank -1: none lost, the plain runs). The
  // second is null where the stage has no reference.
  std::function<StageRun(int ranks, const std::vector<std::string>& extra, const LostWorker& lost)> run_losing;
  std::function<ReferenceOutcome(int ranks, const std::vector<std::string>& extra, const LostWorker& lost)>
      reference_run_losing;
  // The share check of the layout `extra` on `ranks` ranks: the submission's run of it with
  // ShareRunFlags() (`long_run`, already made with extra + those flags, or null: made here)
  // against the grader's own run of the layout and the whole batch on one process, at 512 tokens.
  // Null: the stage has no reference run.
  std::function<ShareOutcome(int ranks, const std::vector<std::string>& extra, const StageRun* long_run)> share;
  // Overlap judged by time (overlap_check.h): the submission's run of the layout `extra` on
  // `ranks` ranks on the grader's limited link, with OverlapRunFlags(), which must complete,
  // match the grader's own run on those flags and send as much, against the grader's overlapped
  // and serial runs. Null: the stage's overlap is not judged by time.
  std::function<OverlapVerdict(int ranks, const std::vector<std::string>& extra, const std::string& what)> overlap;
};

class StageGrading {
 public:
  virtual ~StageGrading() = default;
  // Added to the grader's flags on every run of the stage, before the stage's own tests' flags.
  virtual std::vector<std::string> RunFlags(const std::string& model_type) const { return {}; }
  // The stage's own known mistakes: --mutation values of MutantBinary() (a runfile path, also
  // listed in the package's :grader_data), run once per grading when one of its traces fails.
  virtual std::vector<std::string> OwnMistakes() const { return {}; }
  virtual std::string MutantBinary() const { return ""; }
  // For a stage whose traffic has no closed form of task 4's (its collectives carry
  // activations): the --mutation of MutantBinary() that is the reference. Each run is then held
  // to the bytes the grader's own run of the same layout sent (traffic_check.h). "": none.
  virtual std::string ReferenceMutation() const { return ""; }
  // For a stage whose workers train alone on their shards of the data until their round ends
  // (task 8's local SGD): the main run is held to part 1's reference on each rank's shard
  // (--data_shard=r/ranks, a rank's batch): rank 0's trace to shard 0's, and every rank's final
  // weights to the mean of the shards' models, instead of the single-node run of the whole batch.
  // Such a stage has no share check: its ranks do not split one update's work.
  virtual bool TrainsOnShardsAlone() const { return false; }
  // For such a stage, where rank 0's final weights are not the shards' mean: what it means that
  // they moved `along` times the way from the round's start to that mean (1: there; see
  // final_weights.h's MovedAlong), on `ranks` workers. "": nothing to say.
  virtual std::string ExplainStep(double along, int ranks) const { return ""; }
  // For a stage whose overlap is judged by time (overlap_check.h): the flags that make
  // MutantBinary() the grader's own version of the stage with its communication overlapped with
  // backward (true) or after it (false). Empty: not judged by time.
  virtual std::vector<std::string> OverlapMutantFlags(bool overlapped) const { return {}; }
  // Tried after the first-loss check and before the generic mistakes: a message when `got`
  // matches one of `own` (the runs of OwnMistakes()), else "".
  virtual std::string Diagnose(const Trace& got, const Trace& want, const std::vector<KnownMistake>& own) const {
    return "";
  }
  // Where the generic "summed but not averaged" message tells the student to divide ("": it
  // names no place).
  virtual std::string DivideWhere() const { return ""; }
  // The stage's own tests (its row's, after parity and collectives: OwnTests below) on a
  // completed main run, in the row's order, with the row's names and points.
  virtual std::vector<TestResult> ExtraTests(const StageRun& main_run, const StageCheckContext& context) const {
    return {};
  }
};

// A test of a row in common/stages/stages.bzl, not run yet: its name and points, no score.
TestResult TestOf(const stages::TestSpec& spec);
// The stage's own tests as its row names them, not run yet.
std::vector<TestResult> OwnTests(const stages::Row& stage);

// Called once per stage, from DISTLM_STAGE_GRADING; a second registration of an id is a logic
// error.
bool RegisterStageGrading(const std::string& id, std::function<std::unique_ptr<StageGrading>()> make);
// The grading of the stage `id`: its own where one is registered, else the defaults.
const StageGrading& GradingOf(const std::string& id);
// The ids with a grading of their own (//grading:stage_grading_test checks them against the rows).
std::vector<std::string> RegisteredStageGradings();

}  // namespace distlm::grading

// In the stage's grading library (a cc_library with alwayslink = 1, so that the registration is
// linked into the grader even though nothing names the class).
#define DISTLM_STAGE_GRADING(id, Class)                                              \
  [[maybe_unused]] static const bool kStageGradingRegistered_##Class =              \
      ::distlm::grading::RegisterStageGrading(id, [] { return std::make_unique<Class>(); })
