// Every stage whose row says it has a grading/ package registers one under its id, and no
// grading is registered for a stage the table does not have (a row renamed, a folder copied).
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "common/stages/stages.h"
#include "grading/stage_grading.h"

namespace distlm::grading {
namespace {

TEST(StageGradingTest, EveryRowWithAGradingHasOneAndNoOther) {
  std::set<std::string> registered;
  for (const std::string& id : RegisteredStageGradings()) registered.insert(id);
  for (const auto& st : stages::All()) {
    EXPECT_EQ(registered.count(st.id), st.grading.has_grading ? 1u : 0u)
        << st.id << (st.grading.has_grading ? ": its row says grading = True, but " + st.id +
                                                  "/grading registered nothing (alwayslink = 1? DISTLM_STAGE_GRADING?)"
                                            : ": a grading is registered, but its row does not say grading = True");
    registered.erase(st.id);
  }
  for (const std::string& id : registered) ADD_FAILURE() << "a grading is registered for '" << id << "', which is no stage";
}

TEST(StageGradingTest, AStageWithoutOneGetsTheDefaults) {
  const StageGrading& g = GradingOf("no such stage");
  EXPECT_TRUE(g.RunFlags("bert").empty());
  EXPECT_TRUE(g.OwnMistakes().empty());
  EXPECT_EQ(g.DivideWhere(), "");
}

TEST(StageGradingTest, TheStagesSayWhatTheGraderNeeds) {
  // Task 3's bucket cap follows the model (4 buckets of the tiny BERT and of the tiny ViT).
  EXPECT_EQ(GradingOf("task3").RunFlags("bert"), (std::vector<std::string>{"--ddp=buckets", "--bucket_cap_mb=0.5"}));
  EXPECT_EQ(GradingOf("task3").RunFlags("vit"), (std::vector<std::string>{"--ddp=buckets", "--bucket_cap_mb=0.08"}));
  // A stage's own tests are its row's: those after parity and collectives, with their points.
  const std::vector<TestResult> own = OwnTests(stages::Get("task3"));
  ASSERT_EQ(own.size(), 6u);
  EXPECT_EQ(own[1].name, "task3: bucket all-reduces start while backward runs (3b)");
  EXPECT_EQ(own[1].max_score, stages::Get("task3").grading.own_tests()[1].points);
  EXPECT_GT(own[1].max_score, 0);  // judged by time, from outside: it carries points
  EXPECT_EQ(own[0].max_score, 0);  // the layout, read from a file the process writes: told only
  EXPECT_TRUE(OwnTests(stages::Get("task2b")).empty());
  // A stage's own mistakes, its reference run, and its overlapped and serial runs, come with the
  // binary that makes them.
  for (const auto& st : stages::All()) {
    const StageGrading& g = GradingOf(st.id);
    EXPECT_EQ(g.OwnMistakes().empty() && g.OverlapMutantFlags(true).empty() && g.ReferenceMutation().empty(),
              g.MutantBinary().empty())
        << st.id;
    EXPECT_EQ(g.OverlapMutantFlags(true).empty(), g.OverlapMutantFlags(false).empty()) << st.id;
  }
  EXPECT_EQ(GradingOf("task5").MutantBinary(), "task5/grading/mutant_stage");
}

}  // namespace
}  // namespace distlm::grading
