// CheckShare on figures of the shape measured (tiny BERT, 512 tokens, 4 ranks: the grader's
// data-parallel ranks 214 MB and 1.85 s each, the whole batch on one process 298 MB and 3.5 s):
// an honest run passes with its figures shown, a rank that trained the whole batch at once is
// caught by its memory, one that trained it a share at a time by its CPU time, and what could
// not be measured is either "not judged" (the grader's own) or not credited (the student's).
#include "grading/share_check.h"

#include <gtest/gtest.h>

namespace distlm::grading {
namespace {

constexpr int64_t kMB = 1'000'000;

ShareYardstick Measured() {
  ShareYardstick y;
  y.ranks = 4;
  y.data_parallel = {214 * kMB, 1.85};
  y.single = {298 * kMB, 3.50};
  return y;
}

TestResult Passed() { return {"task2b: losses and gradient norms match", 8, 8, true, "match\n"}; }

TEST(ShareCheckTest, AnHonestRunIsCreditedAndShownItsFigures) {
  // 2a's rank 0 also holds the gathered gradients (7 MB here); a slow synchronisation adds CPU.
  const ShareVerdict v = CheckShare({221 * kMB, 2.3}, Measured());
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_TRUE(v.memory_judged);
  EXPECT_TRUE(v.cpu_judged);
  TestResult t = Passed();
  v.Judge(&t);
  EXPECT_TRUE(t.passed);
  EXPECT_EQ(t.score, 8);
  EXPECT_NE(t.output.find("your largest rank held 221.0 MB at its peak"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("about 28.0 MB a rank's share"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("your busiest rank used 2.30 s of CPU time"), std::string::npos) << t.output;
}

TEST(ShareCheckTest, ARankThatTrainedTheWholeBatchAtOnceIsCaughtByItsMemory) {
  const ShareVerdict v = CheckShare({299 * kMB, 3.6}, Measured());
  EXPECT_FALSE(v.ok);
  TestResult t = Passed();
  v.Judge(&t);
  EXPECT_FALSE(t.passed);
  EXPECT_EQ(t.score, 0);
  EXPECT_EQ(t.output.rfind("not credited: at 512 tokens", 0), 0u) << t.output;
  EXPECT_NE(t.output.find("the activations of 3.0 ranks' shares more than the grader's largest rank"), std::string::npos)
      << t.output;
  EXPECT_NE(t.output.find("trained on more than its own share"), std::string::npos) << t.output;
}

TEST(ShareCheckTest, ARankThatTrainedTheWholeBatchAShareAtATimeIsCaughtByItsCpuTime) {
  const ShareVerdict v = CheckShare({215 * kMB, 3.6}, Measured());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("your busiest rank used 3.60 s of CPU time (the kernel's count), 106 % of the way"),
            std::string::npos)
      << v.message;
  EXPECT_EQ(v.message.find("shares more than"), std::string::npos) << "its memory was a share's:\n" << v.message;
}

// The edges: 3/4 of a share of memory more (21 MB) and 0.6 of the CPU gap (0.99 s) are allowed.
TEST(ShareCheckTest, TheAllowancesEdges) {
  EXPECT_TRUE(CheckShare({235 * kMB, 2.84}, Measured()).ok);
  EXPECT_FALSE(CheckShare({236 * kMB, 1.9}, Measured()).ok);
  EXPECT_FALSE(CheckShare({215 * kMB, 2.85}, Measured()).ok);
}

TEST(ShareCheckTest, WhatCouldNotBeMeasured) {
  // The student's ranks unreadable while the grader's were read: nothing credited on the log's word.
  const ShareVerdict unread = CheckShare({-1, -1}, Measured());
  EXPECT_FALSE(unread.ok);
  EXPECT_NE(unread.message.find("could not read the memory of your ranks"), std::string::npos) << unread.message;
  EXPECT_NE(unread.message.find("could not read the CPU time of your ranks"), std::string::npos) << unread.message;
  // The grader's own not measured, or too close to tell apart: not judged, and said.
  ShareYardstick close = Measured();
  close.single = {220 * kMB, 2.0};
  const ShareVerdict not_judged = CheckShare({400 * kMB, 9.0}, close);
  EXPECT_TRUE(not_judged.ok);
  EXPECT_FALSE(not_judged.memory_judged);
  EXPECT_FALSE(not_judged.cpu_judged);
  EXPECT_NE(not_judged.message.find("not judged here"), std::string::npos) << not_judged.message;
  ShareYardstick unmeasured = Measured();
  unmeasured.data_parallel = {-1, -1};
  EXPECT_TRUE(CheckShare({400 * kMB, 9.0}, unmeasured).ok);
  // One process: nothing to share.
  ShareYardstick one = Measured();
  one.ranks = 1;
  EXPECT_TRUE(CheckShare({400 * kMB, 9.0}, one).message.empty());
}

}  // namespace
}  // namespace distlm::grading
