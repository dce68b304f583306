// For the grading suites that grade the stages' mutants in process (grading/autograder_test and
// each stage's <stage>/grading:mutation_suite, linked into it): one grader for the whole run,
// submissions made of the stages' own files, and the checks of what a mutant keeps.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "grading/autograder.h"

namespace distlm::grading::testing_support {

// `side` ("reference" or "student") folders of the given stages, in the handout's layout.
std::string SubmissionFrom(const std::string& side, const std::vector<std::string>& ids);

// A stage's binary on `side`, as a runfile.
std::string Binary(const std::string& id, const std::string& side);

// The suites' grader settings: 4 ranks, a fixed seed (so one grader's traces serve the whole
// run; a real grading draws its own).
GraderConfig Config(double run_timeout_s, bool recognise);

// One grader for the whole test binary: its single-node trace and known mistakes are made once.
Autograder& Grader();

// The test `name` of a report (a failure, and a stand-in, when there is none).
const TestResult& Find(const GradeReport& r, const std::string& name);

// The name of every stage's parity test, after "<stage>". Inline: the suites' parameters, built
// at static initialisation in other files, read it.
inline const std::string kParity = ": losses and gradient norms match the single-node run";

// A mistake graded as a stage's two tests: parity and "uses <collectives>".
struct Mutation {
  std::string name;
  int parity;                     // points the stage keeps for parity
  int comm;                       // and for using its collectives
  std::vector<std::string> says;  // in the parity message
};

// Grades `mutant` (grading/mutant_stage, or a stage's own) --mutation=<m.name> as a submission
// of `stage` alone (the other tasks missing) and checks the points each of its two tests keeps
// and what the parity test says. Returns the line the suites print at their end.
std::string GradeMutant(const std::string& stage, const std::string& comm_test, int max, const Mutation& m,
                        const std::string& mutant = "grading/mutant_stage");

// A suite of mutations graded as one stage; prints what each scored at its end.
template <const char* kStage>
class MutationSuite : public ::testing::TestWithParam<Mutation> {
 protected:
  static std::vector<std::string>& Scores() {
    static std::vector<std::string> s;
    return s;
  }
  static void TearDownTestSuite() {
    std::printf("\nwhat each mutation of %s scored:\n", kStage);
    for (const auto& s : Scores()) std::printf("  %s\n", s.c_str());
  }
};

// A mistake in a stage with tests of its own (task 3's DDP, task 6's schedule): the points the
// stage keeps and, for each test it must fail, what that test's output says.
struct OwnMutation {
  std::string name;
  double score;                                // of the stage's points
  std::map<std::string, std::string> failing;  // test name -> what its output says
};

// Grades `mutant` (a stage's own, run with `flag`) as a submission of `stage` alone: every test
// of the stage not in `failing` passes, each in it fails saying what it maps to, and the stage
// keeps `score` of `max` points. A test that should fail by the time of a run and that the grader
// did not time on this host (it says why) is reported as not checked, its points not counted.
// `time_overlap` false: overlap is not timed (GradeRequest::time_overlap), and then passes.
void GradeOwnMutant(const std::string& stage, const std::string& mutant, const std::string& flag,
                    const std::map<std::string, std::string>& failing, double score, int max,
                    bool time_overlap = true);

}  // namespace distlm::grading::testing_support
