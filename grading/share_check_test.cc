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
  y.split = {214 * kMB, 1.85};
  y.share_name = "a rank's share of the batch (2 examples)";
  y.single = {298 * kMB, 3.50};
  return y;
}

TEST(ShareCheckTest, AnHonestRunIsCreditedAndShownItsFigures) {
  // 2a's rank 0 also holds the gathered gradients (7 MB here); a slow synchronisation adds CPU.
  const ShareVerdict v = CheckShare({221 * kMB, 2.3}, Measured());
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_TRUE(v.memory_judged);
  EXPECT_TRUE(v.cpu_judged);
  EXPECT_NE(v.message.find("your largest rank held 221.0 MB at its peak"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("about 28.0 MB a rank's share"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("your busiest rank used 2.30 s of CPU time"), std::string::npos) << v.message;
}

TEST(ShareCheckTest, ARankThatTrainedTheWholeBatchAtOnceIsCaughtByItsMemory) {
  const ShareVerdict v = CheckShare({299 * kMB, 3.6}, Measured());
  EXPECT_FALSE(v.ok);
  const std::string& t = v.message;
  EXPECT_EQ(t.rfind("not credited: at 512 tokens a sequence, where a rank's share of the batch (2 examples) "
                           "outweighs", 0), 0u) << t;
  EXPECT_NE(t.find("the activations of 3.0 ranks' shares more than the grader's largest rank"), std::string::npos) << t;
  EXPECT_NE(t.find("computed more than its own share: a data-parallel rank"), std::string::npos) << t;
}

TEST(ShareCheckTest, ARankThatTrainedTheWholeBatchAShareAtATimeIsCaughtByItsCpuTime) {
  const ShareVerdict v = CheckShare({215 * kMB, 3.6}, Measured());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("your busiest rank used 3.60 s of CPU time (the kernel's count), 106 % of the way"),
            std::string::npos)
      << v.message;
  EXPECT_EQ(v.message.find("shares more than"), std::string::npos) << "its memory was a share's:\n" << v.message;
}

// The edges: 3/4 of a share of memory more or less (21 MB) and 0.6 of the CPU gap (0.99 s) more
// are allowed.
TEST(ShareCheckTest, TheAllowancesEdges) {
  EXPECT_TRUE(CheckShare({235 * kMB, 2.84}, Measured()).ok);
  EXPECT_FALSE(CheckShare({236 * kMB, 1.9}, Measured()).ok);
  EXPECT_FALSE(CheckShare({215 * kMB, 2.85}, Measured()).ok);
  EXPECT_TRUE(CheckShare({193 * kMB, 1.2}, Measured()).ok);
  EXPECT_FALSE(CheckShare({192 * kMB, 1.9}, Measured()).ok);
}

// Figures far under the grader's own say the count missed part of the rank (a process whose
// threads hid it from the watch for most of the run): not credited, as an unread figure is not.
TEST(ShareCheckTest, ARankThatHeldLessThanItsShareNeedsIsNotCredited) {
  const ShareVerdict v = CheckShare({160 * kMB, 0.4}, Measured());
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(v.memory_judged);
  EXPECT_NE(v.message.find("your largest rank held only 160.0 MB at its peak"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("1.9 ranks' shares less than the grader's largest rank"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("what the grader cannot see is not credited"), std::string::npos) << v.message;
}

// Tensor parallelism on 2 ranks (measured: 1.86 s a rank, 2.81 s the whole batch): the CPU gap is
// within the count's noise, so only the memory is judged, and the output says so.
TEST(ShareCheckTest, ACpuGapWithinTheNoiseIsNotJudged) {
  ShareYardstick y;
  y.ranks = 2;
  y.split = {250 * kMB, 1.86};
  y.single = {303 * kMB, 2.81};
  const ShareVerdict honest = CheckShare({247 * kMB, 2.59}, y);
  EXPECT_TRUE(honest.ok) << honest.message;
  EXPECT_TRUE(honest.memory_judged);
  EXPECT_FALSE(honest.cpu_judged);
  EXPECT_NE(honest.message.find("of CPU time (not judged:"), std::string::npos) << honest.message;
  const ShareVerdict at_once = CheckShare({305 * kMB, 4.2}, y);
  EXPECT_FALSE(at_once.ok) << at_once.message;
  EXPECT_NE(at_once.message.find("the activations of 1.0 ranks' shares more"), std::string::npos) << at_once.message;
}

// Data parallelism's smallest gap measured (2.01 s a rank, 3.26 s the whole batch): judged, with
// 45 % of the grader's own figure allowed rather than 0.6 of the gap.
TEST(ShareCheckTest, TheCpuAllowanceIsNeverUnder45PercentOfTheGradersOwn) {
  ShareYardstick y = Measured();
  y.split = {214 * kMB, 2.01};
  y.single = {298 * kMB, 3.26};
  EXPECT_TRUE(CheckShare({215 * kMB, 2.90}, y).ok);
  const ShareVerdict v = CheckShare({215 * kMB, 2.92}, y);
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(v.cpu_judged);
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
  unmeasured.split = {-1, -1};
  EXPECT_TRUE(CheckShare({400 * kMB, 9.0}, unmeasured).ok);
  // One process: nothing to share.
  ShareYardstick one = Measured();
  one.ranks = 1;
  EXPECT_TRUE(CheckShare({400 * kMB, 9.0}, one).message.empty());
}

}  // namespace
}  // namespace distlm::grading

namespace distlm::grading {
namespace {

// The run as a whole, from its control group, with the figures measured beside the ones above
// (anonymous and shared memory only, so the single process shows less than its resident set):
// the grader's data-parallel run 391.5 MB and 9.51 s in all, the whole batch on one process
// 181.4 MB and 5.14 s.
ShareYardstick MeasuredWithRuns() {
  ShareYardstick y = Measured();
  y.split.run_memory_bytes = 391'500'000;
  y.split.run_cpu_seconds = 9.51;
  y.single.run_memory_bytes = 181'400'000;
  y.single.run_cpu_seconds = 5.14;
  return y;
}

TEST(ShareCheckTest, AnHonestRunAsAWholeIsCreditedAndShownItsFigures) {
  const ShareVerdict v = CheckShare({219 * kMB, 2.24, 393'200'000, 8.91}, MeasuredWithRuns());
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_NE(v.message.find("your run held 393.2 MB in all at its peak"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("your run used 8.91 s of CPU time in all"), std::string::npos) << v.message;
}

// Every rank trains the whole batch, each other rank's share in a process of its own: no process
// holds or uses more than an honest rank, and the run holds and uses four ranks' worth each.
TEST(ShareCheckTest, TheWholeBatchSpreadOverProcessesIsCaughtByTheRunsAccount) {
  const ShareVerdict v = CheckShare({219 * kMB, 2.3, 4 * 180 * kMB, 4 * 5.1}, MeasuredWithRuns());
  EXPECT_FALSE(v.ok);
  const std::string& t = v.message;
  EXPECT_NE(t.find("your run held 720.0 MB in all at its peak (the kernel's account of the whole run, every "
                   "process and thread it had), the activations of 2.9 ranks' shares more a rank than the grader's "
                   "own data-parallel run 391.5 MB in all (97.9 MB a rank)"), std::string::npos) << t;
  EXPECT_NE(t.find("your run used 20.40 s of CPU time in all (the kernel's account of the whole run), a rank's mean "
                   "99 % of the way"), std::string::npos) << t;
  EXPECT_NE(t.find("so at least one rank computed more than its own share"), std::string::npos) << t;
  // The per-process figures alone pass it.
  EXPECT_TRUE(CheckShare({219 * kMB, 2.3}, Measured()).ok);
}

TEST(ShareCheckTest, ARunTheGraderCouldNotAccountIsNotCreditedWhereItsOwnWere) {
  const ShareVerdict v = CheckShare({219 * kMB, 2.24}, MeasuredWithRuns());
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("the grader could not account your run as a whole"), std::string::npos) << v.message;
  // Where the grader's own runs had no control group (not root, no cgroup file system), the run
  // as a whole is not judged.
  EXPECT_TRUE(CheckShare({219 * kMB, 2.24}, Measured()).ok);
}

}  // namespace
}  // namespace distlm::grading
