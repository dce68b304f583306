// Task 2a's own mistakes (grading/mutant_stage --mutation=root_only_average|scatter_sum), graded
// as task 2a alone (12 + 3 points), each with its own message. Linked into
// //grading:autograder_test, which grades every stage's suite with one grader.
#include <gtest/gtest.h>

#include "grading/mutation_testing.h"

namespace distlm::grading {
namespace {

using ::distlm::grading::testing_support::GradeMutant;
using ::distlm::grading::testing_support::Mutation;
using ::distlm::grading::testing_support::MutationSuite;

constexpr char kTask2a[] = "task2a";
using GatherScatterMutationTest = MutationSuite<kTask2a>;

TEST_P(GatherScatterMutationTest, LosesItsPointsWithItsOwnMessage) {
  Scores().push_back(GradeMutant("task2a", "gather and scatter", 15, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    Mutations, GatherScatterMutationTest,
    ::testing::Values(Mutation{"root_only_average", 0, 0, {"only rank 0 ends with the average", "scatter the average back"}},
                      Mutation{"scatter_sum", 0, 3, {"summed but not divided", "on rank 0, before the scatter"}}),
    [](const ::testing::TestParamInfo<Mutation>& info) { return info.param.name; });

}  // namespace
}  // namespace distlm::grading
