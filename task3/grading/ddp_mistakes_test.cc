// Task 3's local test (task3/student_test.cc, linked beside this file) run on the grader's DDP
// with each usual mistake (mutant_ddp.h): each must fail with the message that names it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/testing/rank_test.h"
#include "grading/mistake_line.h"
#include "task3/grading/mutant_ddp.h"

namespace distlm::task3 {
namespace {

constexpr char kVar[] = "DISTLM_DDP_MUTATION";

// Every rank of the local test reads its mistake from the environment its parent set.
[[maybe_unused]] const bool kMutationFromEnvironment = [] {
  if (const char* m = std::getenv(kVar)) DdpMutation() = m;
  return true;
}();

std::string RunWith(const std::string& mutation, const std::string& rank_case) {
  setenv(kVar, mutation.c_str(), 1);
  std::string message = testing::RunRanks(rank_case, 2);
  unsetenv(kVar);
  grading::PrintMistake("3", mutation, "//task3:student_test (" + rank_case + ")", message);
  return message;
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

}  // namespace
}  // namespace distlm::task3
