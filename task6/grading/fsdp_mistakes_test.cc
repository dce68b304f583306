// Task 6's local test (task6/student_test.cc, linked beside this file) run on the grader's FSDP
// functions with each usual mistake (mutant_fsdp.h): each must fail with the message that
// names it.
#include <gtest/gtest.h>

#include <string>

#include "grading/mistake_runs.h"
#include "task6/grading/mutant_fsdp.h"

namespace distlm::task6 {
namespace {

const grading::LocalTest kLocal = {"DISTLM_FSDP_MUTATION", "6", "//task6:student_test"};

// Every rank of the local test reads its mistake from the environment its parent set.
[[maybe_unused]] const bool kMutationRead = grading::ReadMutation(kLocal.var, FsdpMutation());

std::string RunWith(const std::string& mutation, const std::string& rank_case, int world = 2) {
  return grading::RunLocalTest(kLocal, mutation, mutation.substr(5), rank_case, world);
}

void ExpectNamed(const std::string& mutation, const std::string& rank_case, const std::string& words, int world = 2) {
  const std::string m = RunWith(mutation, rank_case, world);
  EXPECT_NE(m.find(words), std::string::npos) << mutation << ": " << m;
}

TEST(FsdpMistakesTest, TheCorrectFsdpPasses) {
  EXPECT_EQ(RunWith("fsdp_none", "gather_and_reshard"), "");
  EXPECT_EQ(RunWith("fsdp_none", "reduce_scatter"), "");
  EXPECT_EQ(RunWith("fsdp_none", "training_overlap"), "");
}
TEST(FsdpMistakesTest, NeverResharded) {
  ExpectNamed("fsdp_no_reshard", "gather_and_reshard", "parameters were not freed by ReshardUnit");
}
TEST(FsdpMistakesTest, TheSumNotTheMean) {
  ExpectNamed("fsdp_no_average", "reduce_scatter", "holds the SUM of the ranks' gradients, not their mean");
}
TEST(FsdpMistakesTest, AnotherRanksShard) {
  ExpectNamed("fsdp_wrong_shard", "reduce_scatter", "holds block 1 of the average, not block 0");
}
TEST(FsdpMistakesTest, AddedTwice) {
  ExpectNamed("fsdp_reduced_twice", "reduce_scatter", "twice the average", /*world=*/4);
}
TEST(FsdpMistakesTest, ShardOverwritten) {
  ExpectNamed("fsdp_overwrite_shard", "reduce_scatter", "holds only the second micro-batch's gradient");
}
TEST(FsdpMistakesTest, FullGradientKept) {
  ExpectNamed("fsdp_grad_kept", "reduce_scatter", "was not freed after ReduceScatterGrad");
}
TEST(FsdpMistakesTest, GatherWaitedInStartGather) {
  ExpectNamed("fsdp_no_prefetch", "start_gather", "StartGather on rank 0 returned with its all-gather complete");
}
TEST(FsdpMistakesTest, BackwardPrefetchesTheWrongUnit) {
  ExpectNamed("fsdp_prefetch_forward_only", "training_prefetch", "the unit to gather ahead is the one backward runs next");
}
TEST(FsdpMistakesTest, ReduceScatterWaitedInStart) {
  ExpectNamed("fsdp_reduce_waited", "start_reduce_scatter",
              "StartReduceScatter on rank 0 returned with its collective complete");
}

}  // namespace
}  // namespace distlm::task6
