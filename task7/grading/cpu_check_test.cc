#include "task7/grading/cpu_check.h"

#include <optional>
#include <vector>

#include <gtest/gtest.h>

namespace distlm::task7 {
namespace {

// Answers the pairs in order, counting how many were asked for.
struct Pairs {
  std::vector<CpuPair> queue;
  int asked = 0;
  std::optional<CpuPair> operator()() {
    if (asked >= static_cast<int>(queue.size())) return std::nullopt;
    return queue[asked++];
  }
};

TEST(PipelineCpuTest, ARunWithinTheAllowanceIsNotMeasuredAgain) {
  Pairs more{{{5.0, 5.0}}};
  const CpuVerdict v = JudgePipelineCpu({5.9, 5.0}, std::ref(more));
  EXPECT_TRUE(v.judged);
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(more.asked, 0);
  EXPECT_NE(v.message.find("5.90 s"), std::string::npos) << v.message;
}

// An honest run that a busy moment pushed over: the next pair is judged, and says so.
TEST(PipelineCpuTest, AnHonestRunInflatedOnceIsCreditedOnTheNextPair) {
  Pairs more{{{5.1, 5.0}, {9.0, 5.0}}};
  const CpuVerdict v = JudgePipelineCpu({6.77, 5.38}, std::ref(more));
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(more.asked, 1);
  EXPECT_NE(v.message.find("closest of 2 pairs"), std::string::npos) << v.message;
}

// Recomputation costs a forward more every time: every pair over, three pairs, the closest named.
TEST(PipelineCpuTest, RecomputationOverEveryPairIsNotCredited) {
  Pairs more{{{6.6, 5.0}, {6.3, 5.0}, {5.0, 5.0}}};
  const CpuVerdict v = JudgePipelineCpu({6.5, 5.0}, std::ref(more));
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(more.asked, kPipelineCpuPairs - 1);
  EXPECT_NE(v.message.find("6.30 s"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("26 % more"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("closest of 3 pairs"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("recomputation"), std::string::npos) << v.message;
}

TEST(PipelineCpuTest, APairThatFailedToRunEndsTheTriesAndTheMeasuredOneIsJudged) {
  Pairs more{{{-1, 5.0}}};
  const CpuVerdict v = JudgePipelineCpu({6.5, 5.0}, std::ref(more));
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(more.asked, 1);
  EXPECT_NE(v.message.find("30 % more"), std::string::npos) << v.message;
}

TEST(PipelineCpuTest, AnUnaccountedRunIsNotCreditedWhereTheGradersWas) {
  Pairs more;
  const CpuVerdict v = JudgePipelineCpu({-1, 5.0}, std::ref(more));
  EXPECT_TRUE(v.judged);
  EXPECT_FALSE(v.ok);
  EXPECT_NE(v.message.find("could not account"), std::string::npos) << v.message;
}

TEST(PipelineCpuTest, WithoutTheGradersOwnFigureNothingIsJudged) {
  Pairs more;
  const CpuVerdict v = JudgePipelineCpu({9.0, -1}, std::ref(more));
  EXPECT_FALSE(v.judged);
  EXPECT_TRUE(v.ok);
}

}  // namespace
}  // namespace distlm::task7
