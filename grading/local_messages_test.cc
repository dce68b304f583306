// The data-parallel local tests' messages (common/testing/gradient_checks.h) for mistakes whose
// symptom misled before: made on purpose here (grader-private: a working synchronisation is
// written out below), each must name what it got wrong.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/testing/gradient_checks.h"
#include "common/testing/rank_test.h"
#include "grading/mistake_line.h"

namespace distlm::grading {
namespace {

void AllReduce(c10d::ProcessGroup& pg, const torch::Tensor& t) {
  std::vector<torch::Tensor> one = {t};
  pg.allreduce(one)->wait();
}

// Every second parameter all-reduced, every one divided.
RANK_CASE(skip_every_second) {
  testing::CheckGradientSync(
      env,
      [](c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& params) {
        for (size_t i = 0; i < params.size(); i += 2) AllReduce(pg, params[i].grad());
        for (const auto& p : params) p.grad().div_(pg.getSize());
      },
      {"allreduce"}, {});
}

// Right on the first update; on the next it adds the first update's gradients again (a running
// sum kept across updates and never reset).
RANK_CASE(state_not_reset) {
  testing::CheckGradientSync(
      env,
      [](c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& params) {
        static std::map<size_t, torch::Tensor> running;
        for (size_t i = 0; i < params.size(); ++i) {
          torch::Tensor& sum = running[i];
          sum = sum.defined() ? sum + params[i].grad() : params[i].grad().clone();
          params[i].grad().copy_(sum);
          AllReduce(pg, params[i].grad());
          params[i].grad().div_(pg.getSize());
        }
      },
      {"allreduce"}, {});
}

TEST(LocalMessagesTest, AParameterNeverCommunicatedIsNamedAsSuch) {
  const std::string m = testing::RunRanks("skip_every_second", 2);
  PrintMistake("2b", "every second parameter all-reduced", "//task2b:student_test", m);
  EXPECT_NE(m.find("this one was never communicated; synchronise every parameter"), std::string::npos) << m;
}

TEST(LocalMessagesTest, StateKeptBetweenUpdatesIsSuspected) {
  const std::string m = testing::RunRanks("state_not_reset", 2);
  PrintMistake("2b, 3", "state kept between updates", "//task2b:student_test (and task 3's)", m);
  EXPECT_NE(m.find("after update 2"), std::string::npos) << m;
  EXPECT_NE(m.find("while the earlier update was right"), std::string::npos) << m;
}

}  // namespace
}  // namespace distlm::grading
