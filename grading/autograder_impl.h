// The autograder's state and steps (grading/autograder.h's Autograder::Impl): the grader's own
// runs (grader_runs.h, which hold this grading's seed), this grading's space, and the judging of
// one stage's build and runs (grade_stage.cc). Internal to //grading:autograder.
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
#include "grading/grader_runs.h"
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

// The submission's binary on n ranks with the grader's flags and `extra` (later flags win), within
// timeout_s (0: the grader's limit), its loopback limited to loopback_rate bytes a second (0: not),
// `lost` a worker lost and a joiner in its place (stage_runner.h; rank -1: none).
using SubmissionRun = std::function<StageRun(int n, const std::vector<std::string>& extra, double timeout_s,
                                             uint64_t loopback_rate, const LostWorker& lost)>;

struct Autograder::Impl {
  GraderConfig config;
  GraderRuns runs{config};              // what every graded run is compared with
  std::unique_ptr<StudentSpace> space;  // this grading's folders and jails
  bool time_overlap = true;             // GradeRequest::time_overlap of this grading

  void Progress(const std::string& line) const { runs.Progress(line); }

  std::string Diagnose(const Trace& got, const Trace& want, const stages::Row& st);

  // The stage's tests (builds, runs, parity, collectives, its own) into report->tests.
  void GradeStage(const stages::Row& st, const SubmittedStage& sub, const BuildOutcome& build,
                  GradeReport* report);

  // The tests of a run that completed: parity with the grader's trace, the stage's own, the
  // collectives called.
  void Judge(const stages::Row& st, const StageGrading& grading, const StageRun& r,
             const SubmissionRun& run, int ranks,
             bool has_comm_test, TestResult* t_parity_out, TestResult* t_comm_out, std::vector<TestResult>* extra_out);
  // The share check (share_check.h) of the layout `extra` on `ranks` ranks: the submission's
  // run at 512 tokens (`long_run`, or made here through `run`) must complete, match the grader's
  // single-node run at 512 tokens, send enough (`traffic_of`), and hold and compute no more than
  // a rank's share: against task 2b's reference for a data-parallel stage, the stage's own
  // reference (StageGrading::ReferenceMutation) otherwise.
  ShareOutcome ShareCheck(const stages::Row& st, const StageGrading& grading,
                          const SubmissionRun& run, int ranks,
                          const std::vector<std::string>& extra, const StageRun* long_run,
                          const std::function<TrafficVerdict(const StageRun&, int, const std::vector<std::string>&)>& traffic_of);
  // Overlap judged by time (overlap_check.h) of the layout `extra` on `ranks` ranks: the
  // submission's run on the limited link, which must complete, match the grader's own run on
  // the same flags and send as much, against the grader's overlapped and serial runs.
  OverlapVerdict OverlapCheck(const stages::Row& st, const StageGrading& grading, const SubmissionRun& run, int ranks,
                              const std::vector<std::string>& extra, const std::string& what);
};

}  // namespace distlm::grading
