// Task 7's mistakes, each in the reference otherwise (task7/grading/mutant_stage), graded as task
// 7 alone (26 points): 7a's lose the parity test (12) with their own message, and 7c's test (6)
// is then not run; 7c's lose that test only, 7b's their own (8), the forged in-flight count of
// pp_afab_logged_as_1f1b by the memory its ranks held; the forgery of every layout at once
// (grading/mutant_stage's whole_batch) loses everything. Linked into
// //grading:autograder_test, which grades every stage's suite with one grader.
#include <gtest/gtest.h>

#include "grading/mutation_testing.h"

namespace distlm::grading {
namespace {

using ::distlm::grading::testing_support::GradeOwnMutant;
using ::distlm::grading::testing_support::kParity;
using ::distlm::grading::testing_support::OwnMutation;

const std::string k7c =
    "task7: 7c, 2 x 2 (data x tensor) on 4 ranks: losses and gradient norms match the single-node run";
const std::string k7b =
    "task7: 7b, pipelines of 2 stages (1F1B over 4 micro-batches, all forward all backward over 2): losses and "
    "gradient norms match the single-node run, and 1F1B holds 2 micro-batches on stage 0";
const std::string k7cNotRun = "not run: the split on 2 ranks (7a) does not match";

class TensorParallelMutationTest : public ::testing::TestWithParam<OwnMutation> {};

TEST_P(TensorParallelMutationTest, LosesItsTestsWithTheirMessages) {
  const OwnMutation& m = GetParam();
  GradeOwnMutant("task7", "task7/grading/mutant_stage", "--mutation=" + m.name, m.failing, m.score, 26);
}

INSTANTIATE_TEST_SUITE_P(
    Mutations, TensorParallelMutationTest,
    ::testing::Values(OwnMutation{"tp_none", 26, {}},
                      OwnMutation{"tp_f_no_backward", 8,
                                  {{"task7" + kParity, "does not sum the gradient in backward"}, {k7c, k7cNotRun}}},
                      OwnMutation{"tp_g_no_reduce", 8,
                                  {{"task7" + kParity, "never summed over the ranks"}, {k7c, k7cNotRun}}},
                      OwnMutation{"tp_g_backward_reduced", 8,
                                  {{"task7" + kParity, "sums the gradient in backward as well"}, {k7c, k7cNotRun}}},
                      OwnMutation{"tp_bias_per_rank", 8,
                                  {{"task7" + kParity, "ends up in the sum 2 times"}, {k7c, k7cNotRun}}},
                      OwnMutation{"dp_no_average", 20,
                                  {{k7c, "must be the mean over the data group (the ranks holding the same shard"}}},
                      OwnMutation{"dp_sum_not_mean", 20, {{k7c, "sums the gradients over the data group but does not divide"}}},
                      OwnMutation{"mesh_coordinates_swapped", 20,
                                  {{k7c, "your MakeMeshLayout(1, 4, 2) is not self-consistent"}}},
                      OwnMutation{"pp_loss_last_only", 18, {{k7b, "update 1's gradient norm matches but its loss is"}}},
                      OwnMutation{"pp_no_grad_back", 18,
                                  {{k7b, "the last stage's gradients are right, the earlier stages' are not"}}},
                      OwnMutation{"pp_input_without_grad", 18, {{k7b, "does not require its gradient"}}},
                      // Caught by the grader's own call of StageSteps on layouts it drew.
                      OwnMutation{"pp_1f1b_warmup_too_long", 18,
                                  {{k7b, "between their forward and backward; 1F1B's stage s holds at most min(P - s, M)"}}},
                      // A forgery: all forward all backward run as 1F1B, the log rewritten to say 2.
                      OwnMutation{"pp_afab_logged_as_1f1b", 18,
                                  {{k7b, "micro-batches' activations more than the grader's own 1F1B of the same "
                                         "layout"}}},
                      // A forgery that holds less than 1F1B: forwards without autograd, run again
                      // at backward time, the log rewritten to say 2.
                      OwnMutation{"pp_recompute_logged_as_1f1b", 18,
                                  {{k7b, "micro-batches' activations less than the grader's own 1F1B of the same "
                                         "layout"}}}),
    [](const ::testing::TestParamInfo<OwnMutation>& info) { return info.param.name; });

// The forgery of every layout (grading/mutant_stage --mutation=whole_batch): each rank trains the
// whole batch on the whole model, pads the network and logs 1F1B's in-flight count. Every trace,
// every rank's final weights and the byte counts are right; what the ranks held is not.
TEST(TensorParallelForgeryTest, TheWholeBatchOnEveryRankIsCreditedNowhere) {
  GradeOwnMutant("task7", "grading/mutant_stage", "--mutation=whole_batch",
                 {{"task7" + kParity, "not credited: at 512 tokens a sequence, where a rank's part of the model"},
                  {k7c, "not credited: at 512 tokens"},
                  {k7b, "micro-batches' activations more than the grader's own 1F1B"}},
                 0, 26);
}

}  // namespace
}  // namespace distlm::grading
