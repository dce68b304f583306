// Task 6's grading (grading/stage_grading.h): the main run is 6c (--fsdp=overlap). Its own known
// mistakes (mutant_stage.cc) and their messages, then two tests of its own on the main run's
// log, which the given schedule writes from what it saw (task6/fsdp_stage.h):
//   6b  prefetched all-gathers still running when the student's StartGather returned;
//   6c  reduce-scatters still running when StartReduceScatter returned.
// A Start function that waits inside makes every such count 0: the run's losses are right and
// nothing overlaps. One launch in flight over the run is enough to pass: a collective cannot
// complete before the slower ranks join it, so a correct submission shows dozens (30 gathers
// and 20 reduce-scatters launched per 5-update run of the tiny model on 4 ranks).
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/stage_grading.h"
#include "grading/train_log.h"
#include "grading/trace.h"

namespace distlm::task6 {
namespace {

using grading::Fmt;
using grading::IntegerField;
using grading::KnownMistake;
using grading::StageCheckContext;
using grading::StageRun;
using grading::TestResult;
using grading::Trace;

// Sums of a field over the run; false (with *why) when an update lacks it.
bool Sum(const StageRun& r, const std::string& key, int64_t* sum, std::string* why) {
  *sum = 0;
  for (size_t u = 0; u < r.log.size(); ++u) {
    const int64_t v = IntegerField(r.log[u], key);
    if (v < 0) {
      *why = "update " + std::to_string(u + 1) + "'s log line has no " + key + " (task6/fsdp_stage.cc writes it)\n";
      return false;
    }
    *sum += v;
  }
  return true;
}

void Check(const StageRun& r, const char* running_key, const char* launched_key, const std::string& launches,
           const std::string& waited, TestResult& t) {
  int64_t running = 0, launched = 0;
  std::string why;
  if (!Sum(r, running_key, &running, &why) || !Sum(r, launched_key, &launched, &why)) {
    t.output = why;
    return;
  }
  if (launched <= 0) {
    t.output = "the run launched no " + launches + " (is it --fsdp=overlap?)\n";
    return;
  }
  if (running == 0) {
    t.output = "none of the " + std::to_string(launched) + " " + launches + " of the run was still running when " +
               waited + " returned: it waits for its collective inside, so nothing computes while it travels. "
               "Return the Work without calling wait(); the schedule waits for it when the result is needed\n";
    return;
  }
  const double busy = grading::SumOfField(r.log, "comm_busy_ms"), hidden = grading::SumOfField(r.log, "comm_hidden_ms");
  t.passed = true;
  t.score = t.max_score;
  t.output = std::to_string(running) + " of the run's " + std::to_string(launched) + " " + launches +
             " were still running when " + waited + " returned (" + Fmt("%.0f", hidden) + " of " + Fmt("%.0f", busy) +
             " ms of communication overlapped with computation over the run)\n";
}

class Task6Grading : public grading::StageGrading {
 public:
  std::vector<std::string> RunFlags(const std::string&) const override { return {"--fsdp=overlap"}; }
  std::vector<std::string> OwnMistakes() const override {
    return {"fsdp_no_average", "fsdp_wrong_shard", "fsdp_reduced_twice"};
  }
  std::string MutantBinary() const override { return "task6/grading/mutant_stage"; }
  std::string DivideWhere() const override { return " in FinishReduceScatter, once the collective is done"; }
  std::string Diagnose(const Trace& got, const Trace& want, const std::vector<KnownMistake>& own) const override {
    for (const auto& km : own) {
      if (!grading::Matches(got, km)) continue;
      if (km.mutation == "fsdp_no_average") {
        return "the gradient of every unit was summed over the ranks, not averaged: your gradient norm (" +
               Fmt("%.4f", got.grad_norms[0]) + ") is " + grading::Times(got.grad_norms[0], want.grad_norms[0]) +
               " the single-node run's, and your losses match exactly that mistake. Divide this rank's block of "
               "the sum by the world size (pg.getSize()) in FinishReduceScatter before adding it to grad_shard().";
      }
      if (km.mutation == "fsdp_wrong_shard") {
        return "each rank keeps another rank's block of the gradient: your losses match a run whose "
               "reduce-scatter result is taken at the next rank's offset. Rank r owns elements [r*S, (r+1)*S) of "
               "a unit's flat buffers (S = unit.shard_numel()): with the all-reduce fallback, narrow at "
               "pg.getRank() * S.";
      }
      if (km.mutation == "fsdp_reduced_twice") {
        return "every unit's gradient reaches its shard twice: your gradient norm (" + Fmt("%.4f", got.grad_norms[0]) +
               ") is " + grading::Times(got.grad_norms[0], want.grad_norms[0]) +
               " the single-node run's, and your losses match a run that adds each reduce-scatter's block "
               "to grad_shard() twice (a reduction in FinishReduceScatter and again elsewhere, or an add after an "
               "add). Each micro-batch's averaged block is added once.";
      }
    }
    return "";
  }
  std::vector<TestResult> ExtraTests(const StageRun& main_run, const StageCheckContext&) const override {
    std::vector<TestResult> t = grading::OwnTests(stages::Get("task6"));
    Check(main_run, "gathers_still_running", "gathers_prefetched", "prefetched all-gathers", "StartGather", t[0]);
    Check(main_run, "reduce_scatters_still_running", "reduce_scatters", "reduce-scatters", "StartReduceScatter", t[1]);
    return t;
  }
};

DISTLM_STAGE_GRADING("task6", Task6Grading);

}  // namespace
}  // namespace distlm::task6
