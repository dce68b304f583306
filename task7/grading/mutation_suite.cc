// Task 7's mistakes, each in the reference otherwise (task7/grading/mutant_stage), graded as task
// 7 alone (12 points): each loses the parity test, with its own message. Linked into
// //grading:autograder_test, which grades every stage's suite with one grader.
#include <gtest/gtest.h>

#include "grading/mutation_testing.h"

namespace distlm::grading {
namespace {

using ::distlm::grading::testing_support::GradeOwnMutant;
using ::distlm::grading::testing_support::kParity;
using ::distlm::grading::testing_support::OwnMutation;

class TensorParallelMutationTest : public ::testing::TestWithParam<OwnMutation> {};

TEST_P(TensorParallelMutationTest, LosesItsTestsWithTheirMessages) {
  const OwnMutation& m = GetParam();
  GradeOwnMutant("task7", "task7/grading/mutant_stage", "--mutation=" + m.name, m.failing, m.score, 12);
}

INSTANTIATE_TEST_SUITE_P(
    Mutations, TensorParallelMutationTest,
    ::testing::Values(OwnMutation{"tp_none", 12, {}},
                      OwnMutation{"tp_f_no_backward", 0, {{"task7" + kParity, "does not sum the gradient in backward"}}},
                      OwnMutation{"tp_g_no_reduce", 0, {{"task7" + kParity, "never summed over the ranks"}}},
                      OwnMutation{"tp_g_backward_reduced", 0,
                                  {{"task7" + kParity, "sums the gradient in backward as well"}}},
                      OwnMutation{"tp_bias_per_rank", 0, {{"task7" + kParity, "ends up in the sum 2 times"}}}),
    [](const ::testing::TestParamInfo<OwnMutation>& info) { return info.param.name; });

}  // namespace
}  // namespace distlm::grading
