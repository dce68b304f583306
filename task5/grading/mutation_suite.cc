// Task 5's mistakes (task5/grading/mutant_stage --mutation=zero_*), graded as task 5 alone (16 +
// 4 points): each keeps the points it should, its parity message naming the mistake. Linked
// into //grading:autograder_test, which grades every stage's suite with one grader.
#include <gtest/gtest.h>

#include "grading/mutation_testing.h"

namespace distlm::grading {
namespace {

using ::distlm::grading::testing_support::GradeMutant;
using ::distlm::grading::testing_support::Mutation;
using ::distlm::grading::testing_support::MutationSuite;

constexpr char kTask5[] = "task5";
using ZeroMutationTest = MutationSuite<kTask5>;

TEST_P(ZeroMutationTest, LosesItsPointsWithAMessageThatNamesTheMistake) {
  Scores().push_back(GradeMutant("task5", "allgather", 20, GetParam(), "task5/grading/mutant_stage"));
}

INSTANTIATE_TEST_SUITE_P(
    Mutations, ZeroMutationTest,
    ::testing::Values(Mutation{"zero_none", 16, 4, {"match the grader's single-node run"}},
                      Mutation{"zero_no_allgather", 0, 0, {"never share their updated shards", "zero::AllGather"}},
                      Mutation{"zero_wrong_shard", 0, 4, {"another rank's block of the gradient", "[r*S, (r+1)*S)"}},
                      Mutation{"zero_local_norm", 0, 4, {"clip by the norm of this rank's shard only"}}),
    [](const ::testing::TestParamInfo<Mutation>& info) { return info.param.name; });

}  // namespace
}  // namespace distlm::grading
