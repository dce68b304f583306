// The generated table (stages.bzl -> stages_table.inc -> stages.h) holds together: ids (the
// folders) unique, the one single-process stage first (every other stage trains with its step),
// every stage worth points, a distributed stage run on several ranks, the report's traffic
// pattern only where the gradients travel.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "common/stages/stages.h"

namespace distlm::stages {
namespace {

TEST(StagesTest, TheTableHoldsTogether) {
  ASSERT_GE(All().size(), 2u);
  EXPECT_EQ(All()[0].id, "part1");
  EXPECT_EQ(All()[0].grading.ranks, 1) << "part 1 runs on one process";
  EXPECT_EQ(All()[0].report.pattern, SyncPattern::kNone);
  std::set<std::string> ids;
  for (const Row& s : All()) {
    EXPECT_TRUE(ids.insert(s.id).second) << s.id << " twice";
    EXPECT_FALSE(s.files.empty()) << s.id << ": the student writes no file";
    EXPECT_FALSE(s.what.empty()) << s.id;
    EXPECT_GT(s.grading.points(), 0) << s.id << " is worth no points";
    if (&s != &All()[0]) {
      EXPECT_GT(s.grading.ranks, 1) << s.id << ": only part 1 runs on one process";
      // Model-parallel stages send activations, not gradients, and task 8's workers meet once a
      // round, not every update: task 4's per-update patterns do not apply to either.
      if (s.grading.model_parallel == 0 && s.id != "task8") {
        EXPECT_NE(s.report.pattern, SyncPattern::kNone) << s.id << ": its traffic has no pattern";
      }
    }
    EXPECT_TRUE(s.Trains("bert")) << s.id;
  }
  // Task 7a: 2 ranks share one replica of the tiny BERT (its 2 heads), each reading the whole batch.
  const Row& t7 = Get("task7");
  EXPECT_EQ(t7.grading.model_parallel, 2);
  EXPECT_EQ(t7.RunRanks(4), 2);
  EXPECT_EQ(t7.Replicas(2), 1);
  EXPECT_TRUE(t7.Trains("vit"));  // its heads and MLP split as BERT's
  EXPECT_EQ(Get("task2b").RunRanks(4), 4);
  EXPECT_EQ(Get("task2b").Replicas(4), 4);
  EXPECT_EQ(Get("part1").RunRanks(4), 1);
  EXPECT_TRUE(Get("task6").Trains("vit"));
  EXPECT_TRUE(Find("task3")->grading.has_grading) << "task 3's DDP tests live in task3/grading";
  EXPECT_EQ(Find("task2a")->grading.forbidden_ops.size(), 4u);
  EXPECT_EQ(Find("nope"), nullptr);
  EXPECT_THROW(Get("nope"), std::logic_error);
}

// Each row's tests: the parity test first, the collectives test next exactly when the row asks
// for collectives, every test named for its stage and worth points;
// the totals are their sums.
TEST(StagesTest, EachRowsTestsAndTheTotals) {
  int all = 0, required = 0;
  for (const Row& s : All()) {
    ASSERT_FALSE(s.grading.tests.empty()) << s.id;
    EXPECT_EQ(s.grading.parity_test().name, s.id + ": losses and gradient norms match the single-node run");
    // A collectives test exactly where the row asks for collectives.
    EXPECT_EQ(s.grading.has_comm_test, !s.grading.required_ops.empty()) << s.id;
    if (s.grading.has_comm_test) {
      EXPECT_EQ(s.grading.comm_test().name.rfind(s.id + ": uses " + s.grading.required_ops[0], 0), 0u)
          << s.grading.comm_test().name;
    }
    EXPECT_EQ(s.grading.tests.size(), 1 + s.grading.has_comm_test + s.grading.own_tests().size()) << s.id;
    EXPECT_GT(s.grading.parity_test().points, 0) << s.id;
    for (const TestSpec& t : s.grading.tests) {
      // 0: told for feedback only (what the grader cannot observe from outside the processes).
      EXPECT_GE(t.points, 0) << t.name;
      EXPECT_EQ(t.name.rfind(s.id + ": ", 0), 0u) << t.name << " is not named for " << s.id;
    }
    all += s.grading.points();
    if (!s.grading.optional) required += s.grading.points();
  }
  EXPECT_EQ(Get("task2a").grading.comm_test().name, "task2a: uses gather and scatter");
  EXPECT_EQ(Get("task3").grading.own_tests().size(), 6u);
  EXPECT_EQ(TotalPoints("bert"), all);
  EXPECT_EQ(TotalPoints("bert", false), required);
  EXPECT_EQ(TotalPoints("vit"), all) << "every stage trains the ViT too";
}

}  // namespace
}  // namespace distlm::stages
