// Task 3's mistakes, each in a DDP that is otherwise right (task3/grading/mutant_ddp_stage), graded
// as task 3 alone (40 points): each loses exactly the tests it should, each with its message; and
// a right DDP slower than the reference, which loses nothing.
// Linked into //grading:autograder_test, which grades every stage's suite with one grader.
#include <gtest/gtest.h>

#include "grading/mutation_testing.h"

namespace distlm::grading {
namespace {

using ::distlm::grading::testing_support::GradeOwnMutant;
using ::distlm::grading::testing_support::kParity;
using ::distlm::grading::testing_support::OwnMutation;

// What is decided without a clock: every mistake whose message comes from the log, the trace
// or the kernel's byte count, and the right DDPs. Overlap is not timed here (it passes, "not
// judged"): its verdict reads the time of runs, so it is a benchmark of the grader, not a test
// that a busy host may fail (TimedDdpMutationTest, in the manual //grading:autograder_overlap_test,
// and tools/overlap_margin.sh).
class DdpMutationTest : public ::testing::TestWithParam<OwnMutation> {};
// What only the time of runs decides: the serial DDPs that must lose overlap, and the right DDP,
// slower than the reference, that must keep it.
class TimedDdpMutationTest : public ::testing::TestWithParam<OwnMutation> {};

const std::string kLayout = "task3: buckets in reverse order, closed at the cap (3b)";
const std::string kOverlap = "task3: bucket all-reduces start while backward runs (3b)";

TEST_P(DdpMutationTest, LosesItsTestsWithTheirMessages) {
  const OwnMutation& m = GetParam();
  GradeOwnMutant("task3", "task3/grading/mutant_ddp_stage", "--ddp_mutation=" + m.name, m.failing, m.score, 40,
                 /*time_overlap=*/false);
}

TEST_P(TimedDdpMutationTest, LosesItsTestsWithTheirMessages) {
  const OwnMutation& m = GetParam();
  GradeOwnMutant("task3", "task3/grading/mutant_ddp_stage", "--ddp_mutation=" + m.name, m.failing, m.score, 40,
                 /*time_overlap=*/true);
}

const std::string kPerParameter = "task3: per-parameter DDP matches the single-node run (3a)";
const std::string kPerParameterShape = "task3: per-parameter DDP sends one all-reduce per parameter during backward (3a)";
const std::string kNoSync = "task3: no_sync: gradient accumulation sends each gradient once per update (3c)";
const std::string kUnused = "task3: a parameter without a gradient is named in an error";

INSTANTIATE_TEST_SUITE_P(
    Mutations, DdpMutationTest,
    ::testing::Values(
        // Its log says when each all-reduce started: told without a timed run.
        OwnMutation{"launch_at_finish", 30,
                    {{kOverlap, "the all-reduce of bucket 0 started after backward ended"},
                     {kPerParameterShape, "the all-reduce of parameter 0 started after backward ended"}}},
        OwnMutation{"no_division", 2,
                    {{"task3" + kParity, "divide the sum by 4 (pg.getSize()) in FinishGradientSync"},
                     {kOverlap, "overlap is timed only for a DDP whose updates are right"},
                     {kPerParameter, "summed but not divided"},
                     {kPerParameterShape, "not checked"},
                     {kNoSync, "summed but not divided"}}},
        OwnMutation{"ignore_no_sync", 32, {{kNoSync, "during the backward of update 1 that only accumulates"}}},
        OwnMutation{"silent_unused", 38, {{kUnused, "trained on without complaint"}}},
        // Right, and slower than the reference where the handout leaves the choice open (copies,
        // the mean in double precision): everything but the time.
        OwnMutation{"honest_slow", 40, {}},
        // Communicates while accumulating, its log rewritten to claim not: the kernel's count says so.
        OwnMutation{"forged_no_sync", 32, {{kNoSync, "times what the main run sent for as many updates"}}}),
    [](const ::testing::TestParamInfo<OwnMutation>& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(
    TimedMutations, TimedDdpMutationTest,
    ::testing::Values(
        // The embeddings' bucket first: complete only at the end of backward, so nothing overlaps.
        OwnMutation{"forward_order", 30,
                    {{kLayout, "filled from the FIRST parameter"}, {kOverlap, "Yours is nearer the second"}}},
        // Launched after backward, its log rewritten at exit to claim overlap: the time says not.
        OwnMutation{"forged_overlap", 30, {{kOverlap, "Yours is nearer the second"}}},
        // Launched after backward, the wire kept busy during backward with zeros, the log
        // rewritten: the bytes add time, they hide none.
        // (Its junk also shows in the layout and 3a's count, told at no points.)
        OwnMutation{"junk_overlap", 30,
                    {{kOverlap, "Yours is nearer the second"},
                     {kLayout, "break the bucket rule"},
                     {kPerParameterShape, "launched 82 all-reduces for 41 parameters"}}},
        // Right and slower (copies, the mean in double precision): keeps its overlap points.
        OwnMutation{"honest_slow", 40, {}}),
    [](const ::testing::TestParamInfo<OwnMutation>& info) { return info.param.name; });

}  // namespace
}  // namespace distlm::grading
