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
  for (const Stage& s : All()) {
    EXPECT_TRUE(ids.insert(s.id).second) << s.id << " twice";
    EXPECT_FALSE(s.files.empty()) << s.id << ": the student writes no file";
    EXPECT_FALSE(s.what.empty()) << s.id;
    EXPECT_GT(s.grading.parity_points + s.grading.comm_points, 0) << s.id << " is worth no points";
    if (&s != &All()[0]) {
      EXPECT_GT(s.grading.ranks, 1) << s.id << ": only part 1 runs on one process";
      EXPECT_NE(s.report.pattern, SyncPattern::kNone) << s.id << ": its traffic has no pattern";
    }
  }
  EXPECT_TRUE(Find("task3")->grading.has_grading) << "task 3's DDP tests live in task3/grading";
  EXPECT_EQ(Find("task2a")->grading.forbidden_ops.size(), 4u);
  EXPECT_EQ(Find("nope"), nullptr);
  EXPECT_THROW(Get("nope"), std::logic_error);
}

}  // namespace
}  // namespace distlm::stages
