// Task 8's mistakes (task8/grading/mutant_stage --mutation=outer_*), graded as task 8 alone (25
// points): each loses exactly the tests it should, each with its message. Linked into
// //grading:autograder_test, which grades every stage's suite with one grader.
#include <gtest/gtest.h>

#include "grading/mutation_testing.h"

namespace distlm::grading {
namespace {

using ::distlm::grading::testing_support::GradeOwnMutant;
using ::distlm::grading::testing_support::kParity;
using ::distlm::grading::testing_support::OwnMutation;

class OuterLoopMutationTest : public ::testing::TestWithParam<OwnMutation> {};

TEST_P(OuterLoopMutationTest, LosesItsTestsWithTheirMessages) {
  const OwnMutation& m = GetParam();
  GradeOwnMutant("task8", "task8/grading/mutant_stage", "--mutation=" + m.name, m.failing, m.score, 25);
}

const std::string kDiLoCo = "task8: DiLoCo rounds (outer Nesterov momentum, rounds of 2) match the grader run (8a)";
const std::string kInt8 = "task8: int8 rounds with error feedback match the grader run and send its bytes (8b)";
const std::string kJoin = "task8: a worker lost mid-round and a joiner in its place end as the grader run (8c)";
const std::string kJoinNotRun = "not run: 8c's run is DiLoCo's rounds in int8";

INSTANTIATE_TEST_SUITE_P(
    Mutations, OuterLoopMutationTest,
    ::testing::Values(
        OwnMutation{"outer_none", 25, {}},
        OwnMutation{"outer_wrong_sign", 0,
                    {{"task8" + kParity, "-1.00 times the way the workers moved"},
                     {kDiLoCo, "does not end as the grader's own run"},
                     {kInt8, "does not end as the grader's own run"},
                     {kJoin, kJoinNotRun}}},
        OwnMutation{"outer_not_divided", 0,
                    {{"task8" + kParity, "their sum rather than their mean"},
                     {kDiLoCo, "does not end as the grader's own run"},
                     {kInt8, "does not end as the grader's own run"},
                     {kJoin, kJoinNotRun}}},
        OwnMutation{"outer_from_own_params", 0,
                    {{"task8" + kParity, "your ranks end with different weights"},
                     {kDiLoCo, "your ranks end with different weights"},
                     {kInt8, "your ranks end with different weights"},
                     {kJoin, kJoinNotRun}}},
        OwnMutation{"outer_momentum_not_kept", 15,
                    {{kDiLoCo, "momentum buffer starts again every round"}, {kJoin, kJoinNotRun}}},
        OwnMutation{"outer_no_error_feedback", 15, {{kInt8, "drops what each message missed"}, {kJoin, kJoinNotRun}}},
        OwnMutation{"outer_int8_as_float32", 15, {{kInt8, "did not travel as int8"}, {kJoin, kJoinNotRun}}},
        OwnMutation{"outer_state_not_shared", 20, {{kJoin, "SharedState leaves out the outer optimizer's momentum"}}},
        OwnMutation{"outer_error_kept_on_failure", 20, {{kJoin, "had already kept what its int8 message missed"}}},
        // A forgery: rank 2 lives on and the joiner exits at once, so no worker is lost.
        OwnMutation{"outer_kill_dodged", 20, {{kJoin, "ended without the scene this test sets"}}}),
    [](const ::testing::TestParamInfo<OwnMutation>& info) { return info.param.name; });

}  // namespace
}  // namespace distlm::grading
