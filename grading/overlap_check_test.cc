// The overlap verdict (overlap_check.h) on figures of the shapes the grader meets: the
// submission near either of the grader's two runs, at the midpoint, a run that did not
// complete, and yardsticks too close (or missing) to judge by; and the link's second rate on
// runs of the closed form it reasons from.
#include "grading/overlap_check.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

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

TEST(OverlapCheckTest, RunsTooShortToOutweighStartUpAreNotJudged) {
  const OverlapVerdict v = Judge(3.9, 3.0, 3.9);
  EXPECT_FALSE(v.judged);
  EXPECT_TRUE(v.ok);
  EXPECT_NE(v.message.find("too short (under 8 s)"), std::string::npos) << v.message;
}

TEST(OverlapCheckTest, TheVerdictNamesTheLinkItsRunsHad) {
  const OverlapVerdict v = JudgeOverlap({12.4, 12.0, 15.0, 75'000'000}, "its bucket all-reduces");
  EXPECT_NE(v.message.find("600 Mbit/s link"), std::string::npos) << v.message;
}

// The closed form NextOverlapRate reasons from: an update of `forward_s` + `backward_s` whose
// communication of `bytes` at `rate` runs during backward (overlapped) or after it (serial),
// over `updates` updates after `start_s` of start-up.
OverlapTimes Modelled(double backward_s, double bytes, uint64_t rate) {
  const double start_s = 6, forward_s = 0.3, updates = 20;
  const double communication_s = bytes / updates / static_cast<double>(rate);
  OverlapTimes t;
  t.overlapped_s = start_s + updates * (forward_s + std::max(backward_s, communication_s));
  t.serial_s = start_s + updates * (forward_s + backward_s + communication_s);
  t.rate_bytes_per_s = rate;
  return t;
}

TEST(OverlapCheckTest, AWideEnoughGapKeepsTheRate) {
  EXPECT_EQ(NextOverlapRate(Modelled(0.6, 20 * 22.5e6, kOverlapLinkBytesPerS), 20 * 22.5e6), 0u);
}

TEST(OverlapCheckTest, CommunicationFarLongerThanBackwardGetsAFasterLinkWhereTheyMatch) {
  // 0.2 s of backward against 1.2 s of all-reduces an update: the gap is backward's 4 s in 36.
  const double bytes = 20 * 45e6;
  const OverlapTimes slow = Modelled(0.2, bytes, kOverlapLinkBytesPerS);
  ASSERT_LT(GapShare(slow), kMinOverlapGapShare);
  const uint64_t next = NextOverlapRate(slow, bytes);
  EXPECT_NEAR(static_cast<double>(next), bytes / 20 / 0.2, 1.0);  // an update's bytes in 0.2 s
  EXPECT_GT(GapShare(Modelled(0.2, bytes, next)), kWantedOverlapGapShare);
}

TEST(OverlapCheckTest, BackwardLongerThanCommunicationHalvesTheLink) {
  // Communication fully hidden: the gap is all of it, and backward's length is unknown.
  const double bytes = 20 * 3.75e6;
  const OverlapTimes fast = Modelled(0.8, bytes, kOverlapLinkBytesPerS);
  ASSERT_LT(GapShare(fast), kWantedOverlapGapShare);
  const uint64_t next = NextOverlapRate(fast, bytes);
  EXPECT_EQ(next, kOverlapLinkBytesPerS / 2);
  EXPECT_GT(GapShare(Modelled(0.8, bytes, next)), GapShare(fast));
}

TEST(OverlapCheckTest, TheRateMovesAtMostEightTimesAndNeedsBothRuns) {
  OverlapTimes noisy{-1, 20.0, 19.5, kOverlapLinkBytesPerS};  // serial faster: noise
  EXPECT_EQ(NextOverlapRate(noisy, 20 * 45e6), kOverlapLinkBytesPerS * 8);
  EXPECT_EQ(NextOverlapRate({-1, -1, 19.5, kOverlapLinkBytesPerS}, 20 * 45e6), 0u);
  EXPECT_EQ(NextOverlapRate({-1, 20.0, 21.0, kOverlapLinkBytesPerS}, -1), 0u);
}

// Rounds of three runs, replayed from a list: each the submission's, the grader's overlapped and
// its serial run, as a busy host leaves them.
struct Replay {
  std::vector<OverlapTimes> rounds;
  size_t taken = 0;
  std::vector<uint64_t> rates;  // the link each round was asked for
  TimeOverlapRound Timer() {
    return [this](uint64_t rate, OverlapTimes& t, OverlapVerdict&) {
      rates.push_back(rate);
      t = rounds.at(taken++);
      t.rate_bytes_per_s = rate;
      return true;
    };
  }
};

// What the grader's overlapped run sends in the replays: 20 updates of 13.5 MB.
constexpr double kBytes = 20 * 13.5e6;

OverlapVerdict Judge(Replay& replay) {
  return JudgeOverlapRounds(replay.Timer(), kOverlapLinkBytesPerS, kBytes, "its bucket all-reduces");
}

TEST(OverlapRoundsTest, ACreditedFirstRoundStands) {
  Replay honest{{{12.4, 12.0, 15.0}}};
  const OverlapVerdict v = Judge(honest);
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(honest.taken, 1u);
  EXPECT_EQ(v.message.find("fastest"), std::string::npos) << v.message;
}

TEST(OverlapRoundsTest, ALoadOnOneRoundIsJudgedByEachKindsFastestRun) {
  // An honest student's first run slowed by a neighbour, the grader's runs of that round not:
  // one round alone would refuse it (13.9 past the midpoint 13.5).
  Replay honest{{{13.9, 12.0, 15.0}, {12.3, 12.4, 15.6}}};
  const OverlapVerdict v = Judge(honest);
  EXPECT_TRUE(v.judged);
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(honest.taken, 2u);
  EXPECT_NE(v.message.find("the fastest of 2 runs of each kind"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("your run took 12.3 s"), std::string::npos) << v.message;
}

TEST(OverlapRoundsTest, ASerialRunIsNotCreditedByTheSecondRound) {
  // A serial submission, its first round refused; the second round's overlapped run slowed
  // (16.0): alone, that round would credit it (15.1 under the midpoint 15.5).
  Replay serial{{{15.0, 12.0, 15.2}, {15.1, 16.0, 15.0}}};
  const OverlapVerdict v = Judge(serial);
  EXPECT_TRUE(v.judged);
  EXPECT_FALSE(v.ok) << v.message;
  EXPECT_EQ(serial.taken, 2u);
  EXPECT_NE(v.message.find("the fastest of 2 runs of each kind"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("nearer the second (over 13.5 s)"), std::string::npos) << v.message;
}

TEST(OverlapRoundsTest, YardsticksThatMeetInTheSecondRoundAreTimedOnAWiderLink) {
  // A serial submission, refused in the first round; in the second, the grader's fastest runs
  // come within 12 % of each other (20.0 against 21.5), so noise made the first round's gap. Were
  // that "not judged", a serial run would keep the points: a last round on another link decides.
  Replay serial{{{26.0, 21.0, 25.8}, {25.5, 20.0, 21.5}, {30.0, 21.0, 30.5}}};
  const OverlapVerdict v = Judge(serial);
  EXPECT_EQ(serial.taken, 3u);
  ASSERT_EQ(serial.rates.size(), 3u);
  EXPECT_EQ(serial.rates[1], kOverlapLinkBytesPerS);
  EXPECT_NE(serial.rates[2], kOverlapLinkBytesPerS) << "the last round runs on the link NextOverlapRate sets";
  EXPECT_EQ(serial.rates[2], NextOverlapRate({25.5, 20.0, 21.5, kOverlapLinkBytesPerS}, kBytes));
  EXPECT_TRUE(v.judged) << v.message;
  EXPECT_FALSE(v.ok) << v.message;
  EXPECT_NE(v.message.find("timed once more on a"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("your run took 30.0 s"), std::string::npos) << "judged on the last round alone\n"
                                                                       << v.message;
  // The same rounds for an honest run: its last round credits it.
  Replay honest{{{26.0, 21.0, 25.8}, {25.5, 20.0, 21.5}, {21.5, 21.0, 30.5}}};
  EXPECT_TRUE(Judge(honest).ok);
}

TEST(OverlapRoundsTest, YardsticksThatMeetOnEveryLinkAreNotJudged) {
  // Runs no link separates on this host: the first round's gap came by chance.
  Replay noise{{{15.0, 12.4, 15.4}, {12.5, 12.5, 12.6}, {13.0, 12.7, 12.8}}};
  const OverlapVerdict v = Judge(noise);
  EXPECT_EQ(noise.taken, 3u);
  EXPECT_FALSE(v.judged) << v.message;
  EXPECT_TRUE(v.ok);
  EXPECT_NE(v.message.find("too close to tell apart"), std::string::npos) << v.message;
}

TEST(OverlapRoundsTest, AFirstRoundThatCannotJudgeEndsTheCheck) {
  Replay close{{{12.0, 12.0, 12.5}}};
  const OverlapVerdict v = Judge(close);
  EXPECT_EQ(close.taken, 1u);
  EXPECT_FALSE(v.judged) << v.message;
}

TEST(OverlapRoundsTest, AFailedRunEndsTheCheckWithItsVerdict) {
  int taken = 0;
  const OverlapVerdict v = JudgeOverlapRounds(
      [&](uint64_t, OverlapTimes& t, OverlapVerdict& stop) {
        if (++taken == 2) {
          stop.judged = true;
          stop.ok = false;
          stop.message = "your run did not complete";
          return false;
        }
        t = {14.0, 12.0, 15.0};  // refused: a second round
        return true;
      },
      kOverlapLinkBytesPerS, kBytes, "its bucket all-reduces");
  EXPECT_EQ(taken, 2);
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.message, "your run did not complete");
}

}  // namespace
}  // namespace distlm::grading
