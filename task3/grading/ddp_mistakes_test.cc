// Task 3's local test (task3/student_test.cc, linked beside this file) run on the grader's DDP
// with each usual mistake (mutant_ddp.h): each must fail with the message that names it.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "grading/mistake_runs.h"
#include "task3/grading/mutant_ddp.h"

namespace distlm::task3 {
namespace {

const grading::LocalTest kLocal = {"DISTLM_DDP_MUTATION", "3", "//task3:student_test"};

// Every rank of the local test reads its mistake from the environment its parent set.
[[maybe_unused]] const bool kMutationRead = grading::ReadMutation(kLocal.var, DdpMutation());

std::string RunWith(const std::string& mutation, const std::string& rank_case) {
  return grading::RunLocalTest(kLocal, mutation, mutation, rank_case);
}

TEST(DdpMistakesTest, TheCorrectDdpPasses) {
  EXPECT_EQ(RunWith("none", "buckets_average"), "");
  EXPECT_EQ(RunWith("none", "buckets_no_sync"), "");
}

TEST(DdpMistakesTest, LaunchedAfterBackward) {
  const std::string m = RunWith("launch_at_finish", "buckets_average");
  EXPECT_NE(m.find("started after backward ended"), std::string::npos) << m;
}

TEST(DdpMistakesTest, BucketsInRegistrationOrder) {
  const std::string m = RunWith("forward_order", "buckets_average");
  EXPECT_NE(m.find("your buckets follow the registration order"), std::string::npos) << m;
}

TEST(DdpMistakesTest, TheSumNotTheMean) {
  const std::string m = RunWith("no_division", "buckets_average");
  EXPECT_NE(m.find("the sum over ranks, not the mean"), std::string::npos) << m;
}

TEST(DdpMistakesTest, CommunicatingInsideNoSync) {
  const std::string m = RunWith("ignore_no_sync", "buckets_no_sync");
  EXPECT_NE(m.find("with set_require_grad_sync(false): inside no_sync nothing may be communicated"),
            std::string::npos) << m;
}

TEST(DdpMistakesTest, AnUnusedParameterNotNamed) {
  const std::string m = RunWith("silent_unused", "buckets_unused");
  EXPECT_NE(m.find("FinishGradientSync returned normally although never.weight and never.bias"), std::string::npos)
      << m;
}

TEST(DdpMistakesTest, WaitInsideAHook) {
  const std::string m = RunWith("wait_in_hook", "buckets_average");
  EXPECT_NE(m.find("was waited while backward still ran"), std::string::npos) << m;
}

TEST(DdpMistakesTest, BucketsLaunchedAsTheyComplete) {
  EXPECT_EQ(RunWith("fill_order", "buckets_average"), "");  // where buckets complete in bucket order
  const std::string m = RunWith("fill_order", "buckets_l1_first");
  EXPECT_NE(m.find("bucket 2 started before bucket 1"), std::string::npos) << m;
}

TEST(DdpMistakesTest, BucketsThatDifferBetweenRanks) {
  const std::string m = RunWith("cap_by_rank", "buckets_average");
  EXPECT_NE(m.find("the ranks' buckets differ"), std::string::npos) << m;
  EXPECT_EQ(m.find("preamble"), std::string::npos) << "named by Gloo, not by the test: " << m;
}

}  // namespace
}  // namespace distlm::task3
