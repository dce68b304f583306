// The overlap verdict (overlap_check.h) on figures of the shapes the grader meets: the
// submission near either of the grader's two runs, at the midpoint, a run that did not
// complete, and yardsticks too close (or missing) to judge by.
#include "grading/overlap_check.h"

#include <gtest/gtest.h>

namespace distlm::grading {
namespace {

OverlapVerdict Judge(double submission, double overlapped = 12.0, double serial = 15.0) {
  return JudgeOverlap({submission, overlapped, serial}, "its bucket all-reduces");
}

TEST(OverlapCheckTest, NearTheOverlappedRunIsCredited) {
  const OverlapVerdict v = Judge(12.4);
  EXPECT_TRUE(v.judged);
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_NE(v.message.find("your run took 12.4 s"), std::string::npos) << v.message;
}

TEST(OverlapCheckTest, NearTheSerialRunIsNot) {
  const OverlapVerdict v = Judge(14.6);
  EXPECT_TRUE(v.judged);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("nearer the second (over 13.5 s)"), std::string::npos) << v.message;
}

TEST(OverlapCheckTest, TheMidpointIsCreditedAndJustPastItIsNot) {
  EXPECT_TRUE(Judge(13.5).ok);
  EXPECT_FALSE(Judge(13.51).ok);
}

TEST(OverlapCheckTest, FasterThanTheGraderIsCredited) { EXPECT_TRUE(Judge(9.0).ok); }

TEST(OverlapCheckTest, ARunWithoutATimeIsNotCredited) {
  const OverlapVerdict v = Judge(-1);
  EXPECT_TRUE(v.judged);
  EXPECT_FALSE(v.ok);
}

TEST(OverlapCheckTest, YardsticksTooCloseOrMissingAreNotJudged) {
  const OverlapVerdict close = Judge(20.0, 12.0, 12.0 * (1 + kMinOverlapGapShare / 2));
  EXPECT_FALSE(close.judged);
  EXPECT_TRUE(close.ok);
  EXPECT_NE(close.message.find("too close to tell apart"), std::string::npos) << close.message;
  const OverlapVerdict missing = Judge(20.0, -1, 15.0);
  EXPECT_FALSE(missing.judged);
  EXPECT_TRUE(missing.ok);
}

}  // namespace
}  // namespace distlm::grading
