// The grader's check of StageSteps called directly (schedule_check.h): the reference keeps the
// contract on every layout up to 7 stages and 10 micro-batches; each way a schedule can break it
// is named by its property; what the probe file says is read without trusting it.
#include "task7/grading/schedule_check.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace distlm::task7 {
namespace {

const auto kOne = PipelineSchedule::kOneForwardOneBackward;
const auto kAfab = PipelineSchedule::kAllForwardAllBackward;

std::vector<PipelineStep> Steps(const std::string& text) {
  std::vector<PipelineStep> out;
  for (size_t i = 0; i < text.size();) {
    const size_t end = text.find(' ', i);
    const std::string w = text.substr(i, end - i);
    out.push_back({w[0] == 'F', std::stoi(w.substr(1))});
    i = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

TEST(ScheduleCheckTest, TheReferenceKeepsTheContractEverywhere) {
  for (auto schedule : {kOne, kAfab}) {
    for (int p = 1; p <= 7; ++p) {
      for (int m = 1; m <= 10; ++m) {
        for (int s = 0; s < p; ++s) {
          EXPECT_EQ(ScheduleProblem(schedule, p, s, m, StageSteps(schedule, p, s, m)), "")
              << "P=" << p << " s=" << s << " M=" << m;
        }
      }
    }
  }
}

TEST(ScheduleCheckTest, EachBrokenPropertyIsNamed) {
  // Stage 0 of 2, 4 micro-batches: 1F1B holds 2.
  EXPECT_EQ(ScheduleProblem(kOne, 2, 0, 4, Steps("F0 F1 F2 B0 F3 B1 B2 B3")),
            "step 3 (F2) makes the stage hold 3 micro-batches between their forward and backward; 1F1B's stage s "
            "holds at most min(P - s, M) = 2");
  EXPECT_EQ(ScheduleProblem(kOne, 2, 0, 4, Steps("F0 B0 F1 F2 B1 F3 B2 B3")),
            "step 2 (B0) runs a backward while the stage holds 1 micro-batches and has forwards left: 1F1B runs a "
            "backward only when it holds min(P - s, M) = 2 or has no forward left");
  EXPECT_NE(ScheduleProblem(kOne, 2, 0, 4, Steps("F0 F1 B0 F0 F2 B1 F3 B2 B3")).find("runs a forward a second time"),
            std::string::npos);
  EXPECT_NE(ScheduleProblem(kOne, 2, 1, 2, Steps("F1 B1 F0 B0")).find("skips a forward"), std::string::npos);
  EXPECT_NE(ScheduleProblem(kOne, 2, 0, 2, Steps("F0 F1 B1 B0")).find("skips a backward"), std::string::npos);
  EXPECT_NE(ScheduleProblem(kOne, 2, 1, 2, Steps("F0 B0 F1")).find("it has 2 forwards and 1 backwards"),
            std::string::npos);
  EXPECT_NE(ScheduleProblem(kOne, 2, 0, 2, Steps("F0 F1 B0 B1 B2")).find("outside 0 to 1"), std::string::npos);
  EXPECT_NE(ScheduleProblem(kAfab, 2, 0, 3, Steps("F0 F1 B0 F2 B1 B2")).find("before every forward ran"),
            std::string::npos);
  // 1F1B's stage 1 of 2 holds one: run as all forward all backward it holds M.
  EXPECT_NE(ScheduleProblem(kOne, 2, 1, 3, Steps("F0 F1 F2 B0 B1 B2")).find("holds at most min(P - s, M) = 1"),
            std::string::npos);
}

TEST(ScheduleCheckTest, TheLayoutsCoverEachCaseAndChangeWithTheSeed) {
  std::set<std::string> flags;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const std::vector<ProbeLayout> l = DrawProbeLayouts(seed);
    ASSERT_EQ(l.size(), 4u);
    EXPECT_GT(l[0].micro_batches, l[0].stages);
    EXPECT_LT(l[1].micro_batches, l[1].stages);
    EXPECT_EQ(l[2].micro_batches, l[2].stages);
    EXPECT_EQ(l[3].schedule, kAfab);
    for (const auto& x : l) {
      EXPECT_GE(x.stages, 2);
      EXPECT_LE(x.stages, 6);
      EXPECT_GE(x.micro_batches, 1);
      EXPECT_LE(x.micro_batches, 9);
    }
    flags.insert(ProbeFlag(l));
  }
  EXPECT_GT(flags.size(), 40u);
  EXPECT_EQ(ProbeFlag({{kOne, 5, 7}, {kAfab, 2, 3}}), "1f1b:5:7,afab:2:3");
}

TEST(ScheduleCheckTest, TheProbesAnswersAreReadWithoutTrustingThem) {
  const std::vector<ProbeLayout> layouts = {{kOne, 2, 3}};
  const std::string right = "1f1b 2 3 0: " + StepsToString(StageSteps(kOne, 2, 0, 3)) + "\n1f1b 2 3 1: " +
                            StepsToString(StageSteps(kOne, 2, 1, 3)) + "\n";
  EXPECT_EQ(JudgeProbe(layouts, right), "");
  EXPECT_EQ(JudgeProbe(layouts, "1f1b 2 3 0: F0 F1 B0 F2 B1 B2\n"),
            "StageSteps(kOneForwardOneBackward, stages=2, stage=1, micro_batches=3) gave no answer "
            "(schedule_probe.txt has no line for it)");
  EXPECT_EQ(JudgeProbe(layouts, "1f1b 2 3 0: threw: TODO(student)\n"),
            "StageSteps(kOneForwardOneBackward, stages=2, stage=0, micro_batches=3) threw: TODO(student)");
  EXPECT_NE(JudgeProbe(layouts, "1f1b 2 3 0: F0 F1 X9\n").find("gave steps the grader cannot read"), std::string::npos);
  EXPECT_NE(JudgeProbe(layouts, "1f1b 2 3 0: F0 F99999999999\n").find("cannot read"), std::string::npos);
}

}  // namespace
}  // namespace distlm::task7
