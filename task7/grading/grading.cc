// Task 7's grading (grading/stage_grading.h): the main run is the tiny BERT split over the row's
// model_parallel ranks (2: its 2 heads), each reading the whole batch (7a); a second run, 2
// replicas of 2 ranks on 4 (7c), is a test of its own. Its own known mistakes
// (mutant_stage.cc) and their messages; the data-parallel ones of grading/diagnosis.cc do not
// apply to ranks that share one replica, so a trace that matches none is explained here too.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/stage_grading.h"
#include "grading/text.h"
#include "grading/trace.h"
#include "task7/grading/cpu_check.h"
#include "task7/grading/schedule_check.h"

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
  std::string ReferenceMutation() const override { return "tp_none"; }

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

  std::vector<grading::TestResult> ExtraTests(const grading::StageRun& main_run,
                                              const grading::StageCheckContext& c) const override {
    std::vector<grading::TestResult> t = grading::OwnTests(stages::Get("task7"));
    // 7c runs 7a's split in every replica: judged once the split itself is right.
    if (!grading::ParityDiff(*c.expected, grading::TraceOf(main_run)).empty()) {
      t[0].output = "not run: the split on " + Ranks() + " ranks (7a) does not match the single-node run yet (see the "
                    "parity test above); 7c runs that split in every replica\n";
    } else {
      DataTimesTensor(c, t[0]);
    }
    Pipelines(c, t[1]);
    return t;
  }

 private:
  // Runs the submission on `ranks` with `flags` and compares it with the single-node trace: true
  // (and the worst difference in *worst) when it matches and `also` (when given) finds nothing
  // wrong in the run's log; else false, with t.output saying why: `explain`'s words for the
  // trace, or where it says nothing, the stage's diagnosis; or `also`'s.
  static bool RunMatches(const grading::StageCheckContext& c, int ranks, const std::vector<std::string>& flags,
                         const std::function<std::string(const Trace& got, const Trace& want)>& explain,
                         grading::TestResult& t, double* worst,
                         const std::function<std::string(const grading::StageRun&)>& also = nullptr) {
    const std::string said = grading::FlagsSaid(flags);
    const grading::StageRun r = c.run(ranks, flags, 0);
    if (r.exit_code != 0 || r.timed_out || r.log.size() < grading::kSteps || !r.bad_log_lines.empty()) {
      t.output = "the run with" + said + " on " + std::to_string(ranks) + " ranks did not complete: " + c.run_failure(r);
      return false;
    }
    const Trace got = grading::TraceOf(r);
    const Trace& want = *c.expected;
    const std::string diff = grading::ParityDiff(want, got);
    if (diff.empty()) {
      *worst = grading::WorstDifference(want, got);
      // What the grader sees from outside the processes: the bytes on the ranks' network and
      // every rank's final weights.
      std::string wrong = c.traffic ? c.traffic(r, ranks, flags) : "";
      if (wrong.empty() && c.final_weights) wrong = c.final_weights(r, ranks);
      if (wrong.empty() && also) wrong = also(r);
      if (wrong.empty()) return true;
      t.output = "with" + said + " on " + std::to_string(ranks) + " ranks the losses and gradient norms match, but " +
                 wrong + "\n";
      return false;
    }
    std::string why = explain(got, want);
    if (why.empty()) why = c.diagnose(got);
    t.output = "with" + said + " on " + std::to_string(ranks) + " ranks: " + why + "\n\n" + diff + ".\n" +
               grading::TraceTable(want, got);
    return false;
  }

  static bool FirstLossMatches(const Trace& got, const Trace& want) {
    return grading::RelDiff(got.losses[0], want.losses[0]) <= grading::kParityTol;
  }
  static bool FirstNormMatches(const Trace& got, const Trace& want) {
    return !got.grad_norms.empty() && grading::RelDiff(got.grad_norms[0], want.grad_norms[0]) <= grading::kParityTol;
  }

  // 2 replicas of 2 ranks, each replica reading half of every batch: the student's layout, the
  // subgroups made from it, and the average over the data group.
  static void DataTimesTensor(const grading::StageCheckContext& c, grading::TestResult& t) {
    auto explain = [](const Trace& got, const Trace& want) -> std::string {
      if (!FirstLossMatches(got, want) || FirstNormMatches(got, want)) return "";
      if (std::abs(got.grad_norms[0] / want.grad_norms[0] - 2) < 1e-3) {
        return "your gradient norm of update 1 is " + grading::Times(got.grad_norms[0], want.grad_norms[0]) +
               " the single-node run's, the number of replicas: AverageOverDataGroup sums the gradients over the "
               "data group but does not divide by its size.";
      }
      return "update 1's loss matches, but " + NormSays(got, want) +
             ": after backward each gradient must be the mean over the data group (the ranks holding the same shard "
             "in the other replicas), so that every replica steps with the whole batch's gradient.";
    };
    double worst = 0;
    if (!RunMatches(c, 4, {"--tensor_parallel_size=2"}, explain, t, &worst)) return;
    // Each rank's share of the work (grading/share_check.h): a half of the batch on a half of
    // the heads, not the whole batch on the whole model with the network padded.
    const grading::ShareOutcome share =
        c.share ? c.share(4, {"--tensor_parallel_size=2"}, nullptr) : grading::ShareOutcome{};
    if (!share.ok) {
      t.output = "with --tensor_parallel_size=2 on 4 ranks the losses and gradient norms match, but " + share.message;
      return;
    }
    t.passed = true;
    t.score = t.max_score;
    t.output = "the " + std::to_string(grading::kSteps) + " losses and gradient norms of 2 replicas x 2 ranks match " +
               "the single-node run (worst " + Fmt("%.1e", worst) + ")\n" + share.message;
  }

  // The tiny BERT's 2 layers as 2 stages, each rank reading the whole batch: the student's
  // schedules and loop, one run per schedule.
  static void Pipelines(const grading::StageCheckContext& c, grading::TestResult& t) {
    auto explain = [](const Trace& got, const Trace& want) -> std::string {
      const bool loss_ok = FirstLossMatches(got, want), norm_ok = FirstNormMatches(got, want);
      if (!loss_ok && norm_ok) {
        return "update 1's gradient norm matches but its loss is " + grading::Times(got.losses[0], want.losses[0]) +
               " the single-node run's: the gradients are right and the logged loss is not. RunPipelineSteps "
               "returns the sum of the last stage's micro-batch losses (each already divided by M), every one.";
      }
      if (loss_ok && !norm_ok) {
        return "update 1's loss matches, but " + NormSays(got, want) +
               ": the last stage's gradients are right, the earlier stages' are not. Each stage's backward must "
               "send stage s - 1 the gradient of the input it received (input.grad(), after backward), for every "
               "micro-batch.";
      }
      return "";
    };
    // 1F1B's point is its memory: stage 0 of 2 holds 2 micro-batches between their
    // forward and backward (the stage counts them as its steps run: pipeline_in_flight_peak in
    // rank 0's log), where all forward all backward holds all M.
    const std::function<std::string(const grading::StageRun&)> holds = [](const grading::StageRun& r) -> std::string {
      int peak = -1;
      for (const auto& line : r.log) peak = std::max(peak, line.value("pipeline_in_flight_peak", -1));
      if (peak == 2) return "";
      return "your 1F1B's stage 0 held " + std::to_string(peak) + " micro-batches between their forward and their "
             "backward at once: 1F1B holds at most P - s = 2 on stage 0, running a backward as soon as it holds "
             "that many, which is its whole advantage over all forward, all backward.";
    };
    // The schedule itself, asked of StageSteps on layouts drawn for this grading.
    const std::vector<ProbeLayout> layouts = DrawProbeLayouts(std::random_device{}());
    const grading::StageRun probe = c.run(2, {"--schedule_probe=" + ProbeFlag(layouts)}, 60);
    std::string text, why;
    if (probe.exit_code != 0 || !probe.ReadOutput("schedule_probe.txt", 1 << 20, &text, &why)) {
      t.output = "the grader's call of your StageSteps (--schedule_probe=" + ProbeFlag(layouts) + ") did not complete: " +
                 (probe.exit_code != 0 ? c.run_failure(probe) : why) + "\n";
      return;
    }
    if (const std::string problem = JudgeProbe(layouts, text); !problem.empty()) {
      t.output = "the grader called your StageSteps on layouts of its own, drawn for this grading: " + problem + "\n";
      return;
    }
    const std::string probed = "your StageSteps, called by the grader on " + ProbeFlag(layouts) +
                               " (schedule:stages:micro-batches, drawn for this grading), keeps the contract on every "
                               "stage\n";
    std::string passed;
    for (const std::string schedule : {"--pipeline_schedule=1f1b --micro_batches=4", "--pipeline_schedule=afab --micro_batches=2"}) {
      const std::string micro = schedule.substr(schedule.find(' ') + 1);
      double worst = 0;
      const bool one_f_one_b = schedule.find("1f1b") != std::string::npos;
      if (!RunMatches(c, 2, {"--model_parallel=pipeline", schedule.substr(0, schedule.find(' ')), micro}, explain, t,
                      &worst, one_f_one_b ? holds : std::function<std::string(const grading::StageRun&)>())) {
        return;
      }
      passed += (passed.empty() ? "" : "; ") + schedule + " (worst " + Fmt("%.1e", worst) + ")";
    }
    std::string memory;
    if (!PipelineMemoryMatches(c, t, &memory)) return;
    t.passed = true;
    t.score = t.max_score;
    t.output = "the " + std::to_string(grading::kSteps) + " losses and gradient norms match the single-node run with " +
               passed + "\n" + probed + memory;
  }

  // What 1F1B computes (cpu_check.h): the pair already measured, then as many more as it takes,
  // the student's run and the grader's one after the other.
  static bool PipelineCpuMatches(const grading::StageCheckContext& c, const grading::StageRun& first,
                                 const std::vector<std::string>& flags, grading::TestResult& t, std::string* said) {
    const auto again = [&]() -> std::optional<CpuPair> {
      const grading::StageRun r = c.run(2, flags, 0);
      if (!r.Completed(grading::kSteps)) return std::nullopt;
      return CpuPair{r.run_cpu_seconds, c.reference_figures(2, flags, true).run_cpu_seconds};
    };
    const CpuVerdict v = JudgePipelineCpu({first.run_cpu_seconds, c.reference_figures(2, flags, false).run_cpu_seconds}, again);
    if (!v.ok) {
      t.output = v.message + "\n";
      return false;
    }
    if (v.judged) *said += v.message + "\n";
    return true;
  }

  // What 1F1B holds, seen from outside the processes: the log's in-flight count is the
  // submission's own word, the kernel's high-water mark of each rank's memory is not. At 512
  // tokens a sequence a micro-batch's activations outweigh what else a rank allocates meanwhile
  // (attention's scores alone are S^2 floats per head: 13 MB a micro-batch of 2 on stage 0,
  // measured), so the grader's own 1F1B and all forward all backward of the same layout differ by
  // M - P = 2 micro-batches of stage 0's, and the student's 1F1B may hold at most 3/4 of one more
  // than the grader's, or 3/4 of one less: a stage holding one micro-batch at a time ran without
  // pipelining, or recomputed its forwards (run to run the peak moves by under 0.5 MB:
  // Autograder::RunOptions fixes malloc's mmap threshold, and the mark leaves out mapped files,
  // grading/jail/process_watch.h). At the parity runs' 64 tokens the two schedules' peaks differ
  // by 8 MiB of about 200: too close to tell from the rest.
  static bool PipelineMemoryMatches(const grading::StageCheckContext& c, grading::TestResult& t, std::string* said) {
    if (!c.reference_figures) return true;
    if (c.model_type != "bert") {
      *said = "memory: judged with --model_type=bert only (its long sequences are what make a micro-batch's "
              "activations outweigh the rest)\n";
      return true;
    }
    const std::vector<std::string> layout = {"--model_parallel=pipeline", "--pipeline_schedule=1f1b",
                                             "--micro_batches=4"};
    std::vector<std::string> one_f_one_b = layout;
    for (const std::string& f : grading::ShareRunFlags()) one_f_one_b.push_back(f);
    std::vector<std::string> afab = one_f_one_b;
    afab[1] = "--pipeline_schedule=afab";
    const grading::StageRun r = c.run(2, one_f_one_b, 0);
    if (r.exit_code != 0 || r.timed_out || r.log.size() < grading::kSteps) {
      t.output = "the run with --pipeline_schedule=1f1b --micro_batches=4 --max_seq_length=512 --max_steps=10 on 2 "
                 "ranks (the grader's look at its memory) did not complete: " + c.run_failure(r);
      return false;
    }
    const int64_t mine = r.peak_memory_bytes, ref = c.reference_figures(2, one_f_one_b, false).peak_memory_bytes,
                  ref_afab = c.reference_figures(2, afab, false).peak_memory_bytes;
    const auto mb = [](double bytes) { return Fmt("%.1f", bytes / 1e6) + " MB"; };
    if (ref >= 0 && mine < 0) {
      // The grader read its own ranks' memory but not these: nothing to credit on the log's word.
      t.output = "the grader could not read the memory of your 1F1B run's ranks while they ran (at 512 tokens a "
                 "sequence), so their in-flight count is not credited\n";
      return false;
    }
    // Once the memory is judged, the same run for the share check (its trace at 512 tokens, its
    // traffic, its CPU time): a stage computes its own layers, not the whole model.
    const auto share_ok = [&] {
      if (!c.share) return true;
      const grading::ShareOutcome share = c.share(2, layout, &r);
      if (share.ok) {
        *said += share.message;
        return true;
      }
      t.output = "with --pipeline_schedule=1f1b --micro_batches=4 on 2 ranks the losses and gradient norms match, but " +
                 share.message;
      return false;
    };
    // Not measured on this machine, or less than 4 MB between the two schedules: its counts
    // cannot tell them apart.
    if (ref < 0 || ref_afab < 0 || ref_afab - ref < 4'000'000) {
      *said = "memory: not judged here (" +
              (ref < 0 || ref_afab < 0 ? std::string("the grader's own runs were not measured")
                                       : "the grader's own two schedules held " + mb(ref) + " and " + mb(ref_afab)) +
              ")\n";
      return share_ok();
    }
    const double micro_batch = (ref_afab - ref) / 2.0;
    const std::string figures = "the grader's own 1F1B of this layout " + mb(ref) + ", its all forward all backward " +
                                mb(ref_afab) + ": about " + mb(micro_batch) + " a micro-batch";
    if (mine < ref - 0.75 * micro_batch) {
      t.output = "at 512 tokens a sequence your 1F1B's largest rank held " + mb(mine) + " at its peak (the kernel's "
                 "count, read by the grader outside your processes), " + Fmt("%.1f", (ref - mine) / micro_batch) +
                 " micro-batches' activations less than the grader's own 1F1B of the same layout (" + figures +
                 "): 1F1B's stage 0 holds 2 micro-batches between their forward and their backward, and a stage "
                 "that held fewer ran them one at a time or ran a forward again at backward time; neither is 1F1B, "
                 "so it is not credited\n";
      return false;
    }
    if (mine <= ref + 0.75 * micro_batch) {
      *said = "memory at 512 tokens a sequence (measured by the grader, outside your processes): your 1F1B's largest "
              "rank held " + mb(mine) + " at its peak; " + figures + "\n";
      return PipelineCpuMatches(c, r, one_f_one_b, t, said) && share_ok();
    }
    t.output = "at 512 tokens a sequence your 1F1B's largest rank held " + mb(mine) + " at its peak (the kernel's count, "
               "read by the grader outside your processes), " + Fmt("%.1f", (mine - ref) / micro_batch) +
               " micro-batches' activations more than the grader's own 1F1B of the same layout (" + figures +
               "): whatever the log says, stage 0 held more than 2 micro-batches between their forward and their "
               "backward, so it is not credited\n";
    return false;
  }
};

DISTLM_STAGE_GRADING("task7", Task7Grading);

}  // namespace
}  // namespace distlm::task7
