// The autograder's state and steps (grading/autograder.h's Autograder::Impl), shared by its two
// files: autograder.cc (the grader's own runs, the run options, Grade) and grade_stage.cc (one
// stage's tests from its build and run). Internal to //grading:autograder.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/autograder.h"
#include "grading/diagnosis.h"
#include "grading/kit_build.h"
#include "grading/share_check.h"
#include "grading/stage_grading.h"
#include "grading/stage_runner.h"
#include "grading/jail/student_space.h"
#include "grading/submission.h"
#include "grading/test_result.h"
#include "grading/traffic_check.h"
#include "grading/trace.h"

namespace distlm::grading {

struct Autograder::Impl {
  GraderConfig config;
  bool have_expected = false;
  Trace expected;
  double gradient_bytes = 0;  // of the model the grader's own run saved (0: unknown, traffic not checked)
  std::string grader_model;   // that model.safetensors, bytes ("": final weights not checked)
  int64_t expected_peak_memory = -1;  // what that run's process held at most (StageRun::peak_memory_bytes)
  bool mistakes_tried = false;
  std::vector<KnownMistake> mistakes;
  // Each stage's own known mistakes (StageGrading::OwnMistakes), run only when one of its traces
  // fails, by stage id.
  std::map<std::string, bool> own_mistakes_tried;
  std::map<std::string, std::vector<KnownMistake>> own_mistakes;
  // What the grader's own runs could not do (a known mistake that failed to run, a reference
  // run that failed): every one, once, in the report's notes; kept with the runs they concern
  // (cleared when the seed changes).
  std::vector<std::string> grader_notes;
  void Note(const std::string& note) {
    if (std::find(grader_notes.begin(), grader_notes.end(), note) == grader_notes.end()) grader_notes.push_back(note);
  }
  // What the grader's own reference of a stage did, seen from outside its processes: the bytes
  // it sent on the network and the most memory one of its processes held (-1 each where it
  // could not be run or counted).
  struct ReferenceFigures {
    double bytes = -1;
    int64_t peak_memory_bytes = -1;
    double peak_cpu_seconds = -1;  // its busiest process's
  };
  // By stage, ranks and flags (ReferenceRun).
  std::map<std::string, ReferenceFigures> reference_runs;
  // The grader's own runs at 512 tokens a sequence for the share check (share_check.h): the
  // whole batch on one process (its trace, which a student's run at that length must match) and
  // its data-parallel reference, by number of ranks. Cleared when the seed changes.
  struct LongSingle {
    bool tried = false;
    bool ok = false;
    Trace trace;
    ShareFigures figures;
  };
  LongSingle long_single;
  std::map<int, ShareFigures> long_data_parallel;
  std::unique_ptr<StudentSpace> space;  // this grading's folders and jails
  std::string graded_launcher;          // GradedLauncher()'s, once made
  std::string data_dir;                 // the ViT's images (model_type "vit"), made by PrepareData
  uint64_t seed = 0;                    // this grading's (config.seed, or drawn in Grade())

  void Progress(const std::string& line) const {
    if (config.progress) config.progress(line);
  }

  // The flags of a run that trains `replicas` model replicas (each reads 8 / replicas examples).
  std::vector<std::string> Flags(int replicas) const { return RunFlags(replicas, config.model_type, data_dir, seed); }
  // A run of `st` on `ranks` ranks: those flags, then `build` (a prebuilt binary's own), the
  // stage's own (StageGrading::RunFlags), then `extra` (later flags win). The grader's reference
  // runs of a stage take the same, so that they run the layout the student's run did.
  std::vector<std::string> StageFlags(const stages::Row& st, const StageGrading& grading, int ranks,
                                      const std::vector<std::string>& build, const std::vector<std::string>& extra) const {
    std::vector<std::string> flags = Flags(st.Replicas(ranks));
    flags.insert(flags.end(), build.begin(), build.end());
    const std::vector<std::string> own = grading.RunFlags(config.model_type);
    flags.insert(flags.end(), own.begin(), own.end());
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  }

  // --- the grader's own runs (autograder.cc) ------------------------------------------------

  // The grader's own launcher (tools/launch), where student runs can execute it: in a jail the
  // grader's runfiles are covered, so a copy, root's and read-only, in work/shared. Not the
  // kit's: that one was built in, and lies in, the student's folder, where any earlier run could
  // have replaced it.
  const std::string& GradedLauncher();

  // A run named `name`: the grader's own (its binaries, in work/grader), or the student's (built
  // in the kit or prebuilt: started by the grader's launcher with --no_spawn; jailed when
  // confined, in a fresh folder in work/student).
  StageRunOptions RunOptions(const std::string& name, const BuildOutcome* student_build);

  std::string GraderBinary(const std::string& configured, const std::string& runfile) const;

  // A binary the grading cannot go on without: its absence is the grader's failure, named.
  std::string RequiredGraderBinary(const std::string& configured, const std::string& runfile,
                                   const std::string& what) const;

  // The ViT's CIFAR-10-format set, written by the grader into a folder student code may read
  // and not change (StudentSpace::SharedFolder): 8 images per class, enough that no run of 5
  // updates of 8 ends an epoch.
  void PrepareData();

  // Part 1's reference on one process with the whole batch and `extra` flags, as the grader
  // (no network namespace, no address-space limit).
  StageRun SingleNodeRun(const std::string& name, const std::vector<std::string>& extra);
  // That run with the grader's flags: what every stage must reproduce.
  const Trace& Expected();

  // The grader's runs of the known mistakes, made once, when a failing trace needs a name.
  const std::vector<KnownMistake>& Mistakes();
  const std::vector<KnownMistake>& OwnMistakes(const stages::Row& st);
  // `configured`: a path given in the config ("" : the runfile `runfile`); each run on `ranks`
  // ranks that make `replicas` model replicas (stages::Row::RunRanks, Replicas).
  const std::vector<KnownMistake>& RunMistakes(const std::vector<std::string>& names, bool* tried,
                                               std::vector<KnownMistake>* out, const std::string& configured,
                                               const std::string& runfile, int ranks, int replicas);

  // For a stage whose traffic has no closed form here (StageGrading::ReferenceMutation): what
  // the grader's own reference did on `ranks` ranks with the stage's flags and `extra`, counted
  // as a graded run's is; run once per grading and set of flags.
  const ReferenceFigures& ReferenceRun(const stages::Row& st, const StageGrading& grading, int ranks,
                                       const std::vector<std::string>& extra);
  // Its bytes; -1 (not checked) where it could not be run or counted.
  double ReferenceBytes(const stages::Row& st, const StageGrading& grading, int ranks,
                        const std::vector<std::string>& extra) {
    return ReferenceRun(st, grading, ranks, extra).bytes;
  }

  // Those runs, each once per grading (and number of ranks).
  const LongSingle& LongSingleRun();
  ShareFigures LongDataParallel(int ranks);

  // --- judging a run (grade_stage.cc) -------------------------------------------------------

  std::string Diagnose(const Trace& got, const Trace& want, const stages::Row& st);

  // The stage's tests (builds, runs, parity, collectives, its own) into report->tests.
  void GradeStage(const stages::Row& st, const SubmittedStage& sub, const BuildOutcome& build,
                  GradeReport* report);

  // The tests of a run that completed: parity with the grader's trace, the stage's own, the
  // collectives called.
  void Judge(const stages::Row& st, const StageGrading& grading, const StageRun& r,
             const std::function<StageRun(int, const std::vector<std::string>&, double)>& run, int ranks,
             bool has_comm_test, TestResult* t_parity_out, TestResult* t_comm_out, std::vector<TestResult>* extra_out);
  // The share check (share_check.h) of the layout `extra` on `ranks` ranks: the submission's
  // run at 512 tokens (`long_run`, or made here through `run`) must complete, match the grader's
  // single-node run at 512 tokens, send enough (`traffic_of`), and hold and compute no more than
  // a rank's share: against task 2b's reference for a data-parallel stage, the stage's own
  // reference (StageGrading::ReferenceMutation) otherwise.
  ShareOutcome ShareCheck(const stages::Row& st, const StageGrading& grading,
                          const std::function<StageRun(int, const std::vector<std::string>&, double)>& run, int ranks,
                          const std::vector<std::string>& extra, const StageRun* long_run,
                          const std::function<TrafficVerdict(const StageRun&, int, const std::vector<std::string>&)>& traffic_of);
};

}  // namespace distlm::grading
