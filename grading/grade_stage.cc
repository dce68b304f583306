// Autograder::Impl::GradeStage: one stage's tests from its build and its run (builds, runs,
// parity with the grader's trace, the collectives it called, the stage's own tests). Whatever
// the run wrote, the outcome is test results with messages, never an exception out of Grade().
#include <algorithm>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "grading/autograder_impl.h"
#include "grading/diagnosis.h"
#include "grading/final_weights.h"
#include "grading/run_failure.h"
#include "grading/stage_grading.h"
#include "grading/text.h"
#include "grading/trace.h"
#include "grading/traffic_check.h"

namespace distlm::grading {
namespace {

constexpr size_t kMaxTestOutput = 6000;

std::string Cap(std::string s) {
  return CapText(Printable(s), kMaxTestOutput, "\n[... cut ...]\n");
}

std::string JoinOps(const std::vector<std::string>& ops, const std::string& last_sep) {
  std::string s;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i > 0) s += i + 1 == ops.size() ? last_sep : ", ";
    s += ops[i];
  }
  return s;
}

}  // namespace

std::string Autograder::Impl::Diagnose(const Trace& got, const Trace& want, const stages::Row& st) {
  return grading::Diagnose(got, want, st, GradingOf(st.id), st.RunRanks(config.ranks),
                           [this]() -> const std::vector<KnownMistake>& { return runs.Mistakes(); },
                           [this, &st]() -> const std::vector<KnownMistake>& { return runs.OwnMistakes(st); });
}

void Autograder::Impl::GradeStage(const stages::Row& st, const SubmittedStage& sub, const BuildOutcome& build,
                                  GradeReport* report) {
  const int ranks = st.RunRanks(config.ranks);
  const std::string ranks_text = ranks > 1 ? std::to_string(ranks) + " ranks" : "one process";
  TestResult t_build{st.id + ": builds", 0, 0, build.ok, ""};
  TestResult t_run{st.id + ": runs " + std::to_string(kSteps) + " updates on " + ranks_text, 0, 0, false, ""};
  const bool has_comm_test = st.grading.has_comm_test;
  TestResult t_parity = TestOf(st.grading.parity_test());
  TestResult t_comm = has_comm_test ? TestOf(st.grading.comm_test()) : TestResult{};
  const StageGrading& grading = GradingOf(st.id);
  std::vector<TestResult> extra;  // the stage's own tests (StageGrading::ExtraTests)
  auto finish = [&] {
    for (TestResult* t : {&t_build, &t_run, &t_parity, &t_comm}) {
      if (t == &t_comm && !has_comm_test) continue;
      t->output = Cap(t->output);
      report->tests.push_back(*t);
    }
    for (TestResult& t : extra) {
      t.output = Cap(t.output);
      report->tests.push_back(t);
    }
  };
  auto not_run = [&](const std::string& why) {
    t_run.output = t_parity.output = t_comm.output = why;
    for (TestResult t : OwnTests(st)) {
      t.output = why;
      extra.push_back(t);
    }
  };

  std::string files;
  for (const auto& [name, path] : sub.files) files += (files.empty() ? "" : ", ") + st.id + "/" + name;
  t_build.output = (files.empty() ? "" : "your files: " + files + "\n") + build.message + "\n";
  if (!build.ok) {
    not_run("not run: the build step did not succeed (see '" + t_build.name + "')\n");
    finish();
    return;
  }

  int run_count = 0;
  // The submission's binary on n ranks with the grader's flags, then `extra` (later flags win).
  const SubmissionRun run = [&](int n, const std::vector<std::string>& extra_flags, double timeout_s,
                                uint64_t loopback_rate, const LostWorker& lost) {
    const std::string said = FlagsSaid(extra_flags);
    Progress("running " + st.id + " on " + (n > 1 ? std::to_string(n) + " ranks" : "one process") + said + lost.Said());
    const std::vector<std::string> flags = runs.StageFlags(st, grading, n, build.flags, extra_flags);
    StageRunOptions o = runs.RunOptions("run_" + st.id + "_" + std::to_string(run_count++), &build);
    if (timeout_s > 0) o.limits.timeout_s = std::min(timeout_s, o.limits.timeout_s);
    o.limits.loopback_rate_bytes_per_s = loopback_rate;
    o.lost = lost;
    // What this run wrote is out of every later run's reach before the next one starts, even
    // when the run could not be made (the grading goes on with the next stage).
    const auto take_back = [&] {
      if (o.output_owner >= 0) space->TakeBackRun(o.output_root);
    };
    StageRun r;
    try {
      r = RunStage(build.binary, n, n > 1 ? Launcher::kLaunch : Launcher::kSingle, flags, o);
    } catch (...) {
      take_back();
      throw;
    }
    take_back();
    return r;
  };
  StageRun r = run(ranks, {}, 0, 0, {});
  const bool completed = r.Completed(kSteps);
  std::string confinement = Fmt("%.1f", r.seconds) + " s; limits: " + Fmt("%.0f", config.run_timeout_s) + " s, " +
                            Fmt("%.1f", static_cast<double>(config.memory_limit_bytes) / (1 << 30)) +
                            " GiB per process" + (r.network_isolated ? ", loopback-only network" : "");
  if (!r.isolation_note.empty()) confinement += " (" + r.isolation_note + ")";
  if (!completed) {
    t_run.output = RunFailureMessage(r, st, config) + "(" + confinement + ")\n";
    const std::string run_output = t_run.output;
    not_run("not checked: the run did not complete (see '" + t_run.name + "')\n");
    t_run.output = run_output;
    finish();
    return;
  }
  t_run.passed = true;
  t_run.output = "completed " + std::to_string(r.log.size()) + " updates (" + confinement + ")\n";
  try {
    Judge(st, grading, r, run, ranks, has_comm_test, &t_parity, &t_comm, &extra);
  } catch (const GraderError&) {
    throw;
  } catch (const std::exception& e) {
    // Nothing a submission writes stops the grading: this task scores nothing, and says why.
    for (TestResult* t : {&t_parity, &t_comm}) {
      t->passed = false;
      t->score = 0;
    }
    extra.clear();
    const std::string run_output = t_run.output;
    not_run("not graded: the grader could not judge what this run wrote (" + Printable(e.what()) + ")\n");
    t_run.output = run_output;
  }
  finish();
}

void Autograder::Impl::Judge(const stages::Row& st, const StageGrading& grading, const StageRun& r,
                             const SubmissionRun& run,
                             int ranks, bool has_comm_test, TestResult* t_parity_out, TestResult* t_comm_out,
                             std::vector<TestResult>* extra_out) {
  TestResult& t_parity = *t_parity_out;
  TestResult& t_comm = *t_comm_out;
  std::vector<TestResult>& extra = *extra_out;
  // Data parallel: the whole batch on one process. Workers alone on their shards (task 8):
  // part 1 on each shard, rank 0's trace and the mean of their models.
  const bool on_shards = grading.TrainsOnShardsAlone();
  const GraderRuns::SingleNode& yardstick = on_shards ? runs.MeanOfShards(ranks) : runs.Expected();
  const std::string yardstick_name =
      on_shards ? "the mean of the grader's part 1 runs on each of the " + std::to_string(ranks) + " shards"
                : "the grader's single-node run";
  const Trace& want = yardstick.trace;
  const Trace got = TraceOf(r);
  std::string diff =
      on_shards ? ParityDiff(want, got, "the grader's part 1 run on shard 0") : ParityDiff(want, got);
  if (diff.empty()) {
    const double worst = WorstDifference(want, got);
    t_parity.passed = true;
    t_parity.score = t_parity.max_score;
    t_parity.output = "the " + std::to_string(kSteps) + " losses and gradient norms match " +
                      (on_shards ? "the grader's part 1 run on shard 0 of " + std::to_string(ranks) + " (batch " +
                                       std::to_string(kTotalBatch / ranks) + ")"
                                 : "the grader's single-node run (batch " + std::to_string(kTotalBatch) + ")") +
                      " within " + Fmt("%.0e", kParityTol) + " relative (worst " + Fmt("%.1e", worst) + ")\n" +
                      TraceTable(want, got);
  } else {
    t_parity.output = Diagnose(got, want, st) + "\n\n" + diff + ".\n" + TraceTable(want, got);
  }
  // What the log claims against what the kernel counted on the ranks' network: task 4's closed
  // forms, or what the grader's own run of the same layout sent.
  const auto traffic_of = [&](const StageRun& run_of, int n, const std::vector<std::string>& extra) {
    if (st.report.pattern == stages::SyncPattern::kNone && !grading.ReferenceMutation().empty()) {
      return CheckTrafficAgainst(run_of, run_of.network_bytes < 0 ? -1 : runs.ReferenceRun(st, grading, n, extra).bytes);
    }
    return CheckTraffic(run_of, st, n, runs.Expected().gradient_bytes, run_of.log.size());
  };
  const TrafficVerdict traffic = traffic_of(r, ranks, {});
  traffic.Judge(&t_parity);
  // What every rank ends with, against each other and against the grader's run.
  WeightsVerdict weights = CheckFinalWeights(r, ranks, yardstick.model, yardstick_name);
  if (on_shards && weights.checked && !weights.ok && weights.rel_diff > 0 && !yardstick.start_model.empty()) {
    double along = 0;
    std::string why;
    if (MovedAlong(r, yardstick.start_model, yardstick.model, &along, &why)) {
      if (const std::string step = grading.ExplainStep(along, ranks); !step.empty()) {
        weights.message = step + ".\n" + weights.message;
      }
    }
  }
  weights.Judge(&t_parity);
  // What the largest rank held, for the student to see (judged only where a stage says how:
  // task 7b's 1F1B). The yardstick is the whole batch on one process.
  if (!on_shards && r.peak_memory_bytes > 0 && runs.Expected().peak_memory_bytes > 0) {
    t_parity.output += "memory: " + std::string(ranks > 1 ? "your largest rank" : "your process") + " held " +
                       Fmt("%.1f", r.peak_memory_bytes / 1e6) + " MB at its peak (the kernel's count, read by the "
                       "grader); the grader's single-node run, the whole batch on one process, " +
                       Fmt("%.1f", runs.Expected().peak_memory_bytes / 1e6) + " MB\n";
  }

  // Each rank did its share and no more (share_check.h): a run that passed runs again at 512
  // tokens a sequence, and must match the grader's own run at that length, send what it must,
  // and keep its busiest rank's memory and CPU time near the grader's own run of the layout.
  const bool has_share_check = ranks > 1 && !on_shards &&
                               (st.report.pattern != stages::SyncPattern::kNone || !grading.ReferenceMutation().empty());
  std::string share_problem;
  if (t_parity.passed && has_share_check) {
    const ShareOutcome share = ShareCheck(st, grading, run, ranks, {}, nullptr, traffic_of);
    if (share.ok) {
      t_parity.output += share.message;
    } else {
      t_parity.passed = false;
      t_parity.score = 0;
      t_parity.output = share.message + "\n" + t_parity.output;
      share_problem = "each rank did not do its own share of the work (see the parity test)";
    }
  }

  const std::vector<TestResult> own_tests = OwnTests(st);
  if (!own_tests.empty()) {
    StageCheckContext c;
    c.ranks = ranks;
    c.model_type = config.model_type;
    c.expected = &want;
    c.run = [&](int n, const std::vector<std::string>& extra_flags, double timeout_s) {
      return run(n, extra_flags, timeout_s, 0, {});
    };
    c.run_losing = [&](int n, const std::vector<std::string>& extra, const LostWorker& lost) {
      return run(n, extra, 0, 0, lost);
    };
    c.diagnose = [&](const Trace& trace) { return Diagnose(trace, want, st); };
    c.run_failure = [&](const StageRun& failed) { return RunFailureMessage(failed, st, config); };
    c.traffic = [&](const StageRun& run_of, int n, const std::vector<std::string>& extra) {
      const TrafficVerdict v = traffic_of(run_of, n, extra);
      return v.counted && !v.enough ? v.Describe() : std::string();
    };
    c.final_weights = [&](const StageRun& run_of, int n) {
      const WeightsVerdict v = CheckFinalWeights(run_of, n, yardstick.model, yardstick_name);
      return v.checked && !v.ok ? v.message : std::string();
    };
    if (!grading.ReferenceMutation().empty()) {
      c.reference_figures = [&](int n, const std::vector<std::string>& extra, bool again) {
        return runs.ReferenceRun(st, grading, n, extra, again).share;
      };
      c.reference_run = [&](int n, const std::vector<std::string>& extra) {
        const GraderRuns::ReferenceFigures& f = runs.ReferenceRun(st, grading, n, extra);
        return ReferenceOutcome{f.trace, f.model, f.bytes};
      };
      c.reference_run_losing = [&](int n, const std::vector<std::string>& extra, const LostWorker& lost) {
        const GraderRuns::ReferenceFigures& f = runs.ReferenceRun(st, grading, n, extra, false, lost);
        return ReferenceOutcome{f.trace, f.model, f.bytes};
      };
      c.share = [&](int n, const std::vector<std::string>& extra, const StageRun* long_run) {
        return ShareCheck(st, grading, run, n, extra, long_run, traffic_of);
      };
    }
    if (!grading.OverlapMutantFlags(true).empty()) {
      c.overlap = [&](int n, const std::vector<std::string>& extra, const std::string& what) {
        if (!time_overlap) {
          OverlapVerdict v;  // not judged, as where the grader's own runs cannot tell (credited)
          v.message = "overlap not judged by time: this grading does not time it (GradeRequest::time_overlap)\n";
          return v;
        }
        return OverlapCheck(st, grading, run, n, extra, what);
      };
    }
    if (traffic.counted && !traffic.enough && traffic.reference_bytes <= 0) {
      // The stage's own tests read this run's log and files: not credited either. (Where the
      // yardstick is the grader's own run, task 7's, each test's run is held to its own.)
      for (TestResult t : own_tests) {
        t.output = "not credited: " + traffic.Describe() + "\n";
        extra.push_back(t);
      }
    } else {
      extra = grading.ExtraTests(r, c);
      // The row names the tests and their points; a grading that returns others is the grader's bug.
      bool same = extra.size() == own_tests.size();
      for (size_t i = 0; same && i < extra.size(); ++i) {
        same = extra[i].name == own_tests[i].name && extra[i].max_score == own_tests[i].max_score;
      }
      if (!same) {
        throw std::logic_error(st.id + "'s grading returned other tests than its row in common/stages/stages.bzl names");
      }
    }
  }
  if (has_comm_test) {
    std::string problem = CollectivesProblem(r.log, st.grading.required_ops, st.grading.forbidden_ops);
    if (problem.empty() && traffic.counted && !traffic.enough) {
      problem = "the collectives your log reports were not sent (" + traffic.Describe() + ")";
    }
    if (problem.empty() && !share_problem.empty()) problem = share_problem;
    if (problem.empty()) {
      t_comm.passed = true;
      t_comm.score = t_comm.max_score;
      t_comm.output = "every update called " + JoinOps(st.grading.required_ops, " and ") + "\n";
    } else {
      t_comm.output = problem + "; " + st.id + " must call " + JoinOps(st.grading.required_ops, " and ") +
                      (st.grading.forbidden_ops.empty() ? "" : " (and not " + JoinOps(st.grading.forbidden_ops, " or ") + ")") +
                      " to synchronise the gradients\n";
    }
  }
}

ShareOutcome Autograder::Impl::ShareCheck(
    const stages::Row& st, const StageGrading& grading,
    const SubmissionRun& run, int ranks,
    const std::vector<std::string>& extra, const StageRun* long_run,
    const std::function<TrafficVerdict(const StageRun&, int, const std::vector<std::string>&)>& traffic_of) {
  ShareOutcome out;
  if (config.model_type != "bert") {
    out.message = "each rank's share: judged with --model_type=bert only (its long sequences are what make a share's "
                  "work outweigh the rest)\n";
    return out;
  }
  const GraderRuns::LongSingle& one = runs.LongSingleRun();
  if (!one.ok) {
    out.message = "each rank's share: not judged here (the grader's own run at 512 tokens failed)\n";
    return out;
  }
  std::vector<std::string> flags = extra;
  for (const std::string& f : ShareRunFlags()) flags.push_back(f);
  const std::string said = FlagsSaid(flags);
  StageRun made;
  if (long_run == nullptr) {
    made = run(ranks, flags, 0, 0, {});
    long_run = &made;
  }
  const auto refused = [&](const std::string& why) {
    out.ok = false;
    out.message = "not credited: " + why + "\n";
    return out;
  };
  const StageRun& r = *long_run;
  if (!r.Completed(kSteps)) {
    return refused("the run with" + said + " on " + std::to_string(ranks) + " ranks (the grader's look at each rank's "
                   "share of the work) did not complete: " + RunFailureMessage(r, st, config));
  }
  if (const std::string diff = ParityDiff(one.trace, TraceOf(r)); !diff.empty()) {
    return refused("with" + said + " on " + std::to_string(ranks) + " ranks your run does not match the grader's "
                   "single-node run at 512 tokens, while at 64 it did (" + diff + ")");
  }
  if (const TrafficVerdict traffic = traffic_of(r, ranks, flags); traffic.counted && !traffic.enough) {
    return refused("with" + said + " on " + std::to_string(ranks) + " ranks " + traffic.Describe());
  }
  ShareYardstick y;
  y.ranks = ranks;
  y.single = one.figures;
  if (st.report.pattern != stages::SyncPattern::kNone) {
    y.split = runs.LongDataParallel(ranks);
    y.share_name = "a rank's share of the batch (" + std::to_string(kTotalBatch / ranks) + " examples)";
  } else {
    const GraderRuns::ReferenceFigures& ref = runs.ReferenceRun(st, grading, ranks, flags);
    y.split = ref.share;
    y.split_name = "run of this layout";
    y.share_name = "a rank's part of the model and the batch";
    y.advice = "each rank computes its own part (its heads and MLP slice, its layers, its examples) and gets the rest "
               "through the collectives";
  }
  const ShareVerdict v = CheckShare(FiguresOf(r), y);
  out.ok = v.ok;
  out.message = v.message;
  return out;
}

OverlapVerdict Autograder::Impl::OverlapCheck(const stages::Row& st, const StageGrading& grading,
                                              const SubmissionRun& run, int ranks,
                                              const std::vector<std::string>& extra, const std::string& what) {
  GraderRuns::OverlapRuns& yard = runs.OverlapYardsticks(st, grading, ranks, extra);
  OverlapTimes times = yard.times;
  // Yardsticks that cannot judge (missing, too short, too close) need no run of the submission.
  if (OverlapVerdict unjudged = JudgeOverlap(times, what); !unjudged.judged) return unjudged;
  std::vector<std::string> flags = extra;
  for (const std::string& f : OverlapRunFlags(config.model_type)) flags.push_back(f);
  const std::string said = FlagsSaid(flags);
  const std::string on = "your run with" + said + " on the grader's limited link ";
  // One timed run: its seconds, or a verdict that ends the check.
  auto timed = [&](uint64_t rate, OverlapVerdict* stop) -> double {
    const StageRun r = run(ranks, flags, 0, rate, {});
    stop->judged = true;
    stop->ok = false;
    if (!r.Completed(kOverlapSteps)) {
      stop->message = on + "did not complete: " + RunFailureMessage(r, st, config);
      return -1;
    }
    if (r.loopback_rate != rate) {
      *stop = JudgeOverlap({}, what);  // the grader could not limit this run's link: not judged
      return -1;
    }
    if (const std::string diff = ParityDiff(yard.trace, TraceOf(r)); !diff.empty()) {
      stop->message = on + "does not match the grader's own run on those flags: " + diff + "\n";
      return -1;
    }
    if (yard.bytes > 0 && r.network_bytes >= 0 && r.network_bytes < kMinTrafficShare * yard.bytes) {
      stop->message = on + "sent " + Fmt("%.1f", r.network_bytes / 1e6) + " MB over loopback, under " +
                      Fmt("%.0f", kMinTrafficShare * 100) + " % of the " + Fmt("%.1f", yard.bytes / 1e6) +
                      " MB the grader's own run sent: its time is not that of the whole synchronisation\n";
      return -1;
    }
    return r.seconds;
  };
  // Each round: the submission's run and the grader's two, one after the other, on the link of
  // `rate` (the first round's grader runs are the yardsticks where they were timed just now).
  const TimeOverlapRound round = [&](uint64_t rate, OverlapTimes& t, OverlapVerdict& stop) {
    t.rate_bytes_per_s = rate;
    t.submission_s = timed(rate, &stop);
    if (t.submission_s < 0) return false;
    OverlapTimes grader = yard.times;
    if (yard.times_fresh && rate == yard.times.rate_bytes_per_s) {
      yard.times_fresh = false;
    } else {
      GraderRuns::OverlapRuns pair;
      if (!runs.TimeOverlapPair(st, grading, ranks, extra, rate, &pair, "overlap is not judged by time")) {
        OverlapTimes failed;
        failed.rate_bytes_per_s = rate;
        stop = JudgeOverlap(failed, what);  // says it was not judged
        return false;
      }
      grader = pair.times;
      // A busy host only slows a run: on the yardsticks' link, the grader's fastest run of each
      // kind in this grading stands for that kind, so that one slow serial run does not move the
      // bar past a serial submission (seen: a serial run credited at 20.8 s beside a serial
      // yardstick slowed to 25.6 s, its fastest being 20.8 s).
      if (rate == yard.times.rate_bytes_per_s) {
        KeepFastestGraderRuns(yard.times, grader);
        grader = yard.times;
      }
    }
    t.overlapped_s = grader.overlapped_s;
    t.serial_s = grader.serial_s;
    return true;
  };
  return JudgeOverlapRounds(round, times.rate_bytes_per_s, yard.bytes, what);
}

}  // namespace distlm::grading
