// Task 6's mistakes, each in the reference otherwise (task6/grading/mutant_stage), graded as task
// 6 alone (20 points): each loses exactly the tests it should, each with its message (6b and
// 6c, told at no points, lose none). Linked
// into //grading:autograder_test, which grades every stage's suite with one grader.
#include <gtest/gtest.h>

#include "grading/mutation_testing.h"

namespace distlm::grading {
namespace {

using ::distlm::grading::testing_support::GradeOwnMutant;
using ::distlm::grading::testing_support::kParity;
using ::distlm::grading::testing_support::OwnMutation;

class FsdpMutationTest : public ::testing::TestWithParam<OwnMutation> {};

TEST_P(FsdpMutationTest, LosesItsTestsWithTheirMessages) {
  const OwnMutation& m = GetParam();
  GradeOwnMutant("task6", "task6/grading/mutant_stage", "--mutation=" + m.name, m.failing, m.score, 20);
}

const std::string kFsdpRuns = "task6: runs 5 updates on 4 ranks";
const std::string kFsdpComm = "task6: uses allgather";
const std::string kFsdpPrefetch = "task6: prefetched all-gathers travel while a unit computes (6b)";
const std::string kFsdpOverlap = "task6: reduce-scatters run behind the rest of backward (6c)";

INSTANTIATE_TEST_SUITE_P(
    Mutations, FsdpMutationTest,
    ::testing::Values(
        OwnMutation{"fsdp_none", 20, {}},
        OwnMutation{"fsdp_no_average", 4, {{"task6" + kParity, "summed over the ranks, not averaged"}}},
        OwnMutation{"fsdp_wrong_shard", 4, {{"task6" + kParity, "another rank's block of the gradient"}}},
        OwnMutation{"fsdp_reduced_twice", 4, {{"task6" + kParity, "reaches its shard twice"}}},
        OwnMutation{"fsdp_no_reshard", 0,
                     {{kFsdpRuns, "parameters were not freed after its forward"},
                      {"task6" + kParity, "not checked: the run did not complete"},
                      {kFsdpComm, "not checked"},
                      {kFsdpPrefetch, ""},
                      {kFsdpOverlap, ""}}},
        OwnMutation{"fsdp_no_prefetch", 20, {{kFsdpPrefetch, "StartGather returned: it waits for its collective"}}},
        OwnMutation{"fsdp_reduce_waited", 20,
                     {{kFsdpOverlap, "StartReduceScatter returned: it waits for its collective"}}}),
    [](const ::testing::TestParamInfo<OwnMutation>& info) { return info.param.name; });

}  // namespace
}  // namespace distlm::grading
