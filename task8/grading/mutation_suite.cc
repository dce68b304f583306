// Task 8's mistakes (task8/grading/mutant_stage --mutation=outer_*), graded as task 8 alone (20
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
  GradeOwnMutant("task8", "task8/grading/mutant_stage", "--mutation=" + m.name, m.failing, m.score, 20);
}

const std::string kDiLoCo = "task8: DiLoCo rounds (outer Nesterov momentum, rounds of 2) match the grader run (8a)";
const std::string kInt8 = "task8: int8 rounds with error feedback match the grader run and send its bytes (8b)";

INSTANTIATE_TEST_SUITE_P(
    Mutations, OuterLoopMutationTest,
    ::testing::Values(
        OwnMutation{"outer_none", 20, {}},
        OwnMutation{"outer_wrong_sign", 0,
                    {{"task8" + kParity, "-1.00 times the way the workers moved"},
                     {kDiLoCo, "does not end as the grader's own run"},
                     {kInt8, "does not end as the grader's own run"}}},
        OwnMutation{"outer_not_divided", 0,
                    {{"task8" + kParity, "their sum rather than their mean"},
                     {kDiLoCo, "does not end as the grader's own run"},
                     {kInt8, "does not end as the grader's own run"}}},
        OwnMutation{"outer_from_own_params", 0,
                    {{"task8" + kParity, "your ranks end with different weights"},
                     {kDiLoCo, "your ranks end with different weights"},
                     {kInt8, "your ranks end with different weights"}}},
        OwnMutation{"outer_momentum_not_kept", 15, {{kDiLoCo, "momentum buffer starts again every round"}}},
        OwnMutation{"outer_no_error_feedback", 15, {{kInt8, "drops what each message missed"}}},
        OwnMutation{"outer_int8_as_float32", 15, {{kInt8, "did not travel as int8"}}}),
    [](const ::testing::TestParamInfo<OwnMutation>& info) { return info.param.name; });

}  // namespace
}  // namespace distlm::grading
