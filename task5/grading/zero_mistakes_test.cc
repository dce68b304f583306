// Task 5's local test (task5/student_test.cc, linked beside this file) run on the grader's
// sharded step with each usual mistake (mutant_step.h): each must fail with the message that
// names it.
#include <gtest/gtest.h>

#include <string>

#include "grading/mistake_runs.h"
#include "task5/grading/mutant_step.h"

namespace distlm::task5 {
namespace {

const grading::LocalTest kLocal = {"DISTLM_ZERO_MUTATION", "5", "//task5:student_test"};

// Every rank of the local test reads its mistake from the environment its parent set.
[[maybe_unused]] const bool kMutationRead = grading::ReadMutation(kLocal.var, ZeroMutation());

// Three clipped updates on 2 ranks: clipping is active, and a mistake that shows only after an
// update (the all-gather before the step) has one to show after.
std::string RunWith(const std::string& mutation) {
  return grading::RunLocalTest(kLocal, mutation, mutation.substr(5), "three_clipped_updates");
}

void ExpectNamed(const std::string& mutation, const std::string& words) {
  const std::string m = RunWith(mutation);
  EXPECT_NE(m.find(words), std::string::npos) << mutation << ": " << m;
}

TEST(ZeroMistakesTest, TheCorrectStepPasses) { EXPECT_EQ(RunWith("zero_none"), ""); }
TEST(ZeroMistakesTest, NoAllGather) { ExpectNamed("zero_no_allgather", "the ranks never shared their updated blocks"); }
TEST(ZeroMistakesTest, AnotherRanksShard) { ExpectNamed("zero_wrong_shard", "was updated with the gradient of block 1"); }
TEST(ZeroMistakesTest, ClippedByTheShardsNorm) { ExpectNamed("zero_local_norm", "clipped by the norm of this rank's shard alone"); }
TEST(ZeroMistakesTest, TheSumNotTheMean) { ExpectNamed("zero_no_division", "the norm of the SUM of the ranks' gradients"); }
TEST(ZeroMistakesTest, NothingReduced) { ExpectNamed("zero_own_gradient", "this rank's own gradient, not the average"); }
TEST(ZeroMistakesTest, NoClipping) { ExpectNamed("zero_no_clip", "matches an update without clipping"); }
TEST(ZeroMistakesTest, TheNormAfterClipping) { ExpectNamed("zero_clipped_norm", "the norm after clipping"); }
TEST(ZeroMistakesTest, GatheredBeforeTheStep) {
  ExpectNamed("zero_gather_first", "from before the last update: all-gather after opt.StepShard()");
}

}  // namespace
}  // namespace distlm::task5
