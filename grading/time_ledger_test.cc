// Where a grading's time went, from progress lines of the shapes the grader says.
#include "grading/time_ledger.h"

#include <gtest/gtest.h>

namespace distlm::grading {
namespace {

TEST(TimeLedgerTest, EachLineLastsUntilTheNextAndCountsUnderWhatItDoes) {
  TimeLedger l;
  l.Add("preparing a clean student kit in /tmp/w/student/kit", 0);
  l.Add("building //part1:student //task3:student in the kit with the submitted files", 1);
  l.Add("running part1 on one process", 26);
  l.Add("running the grader's own single-node trace (part 1 reference, batch 8)", 27);
  l.Add("running task3 on 4 ranks", 30);
  l.Add("running the grader's own task3 on 4 ranks on a 300 Mbit/s link (overlapped), to time overlap", 38);
  l.Add("running task3 on 4 ranks --ddp=per_parameter", 60);
  EXPECT_EQ(l.Summary(70),
            "build 26 s; your runs 19 s (part1 1, task3 18); the grader's own runs 25 s (shared 3, task3 22)");
}

TEST(TimeLedgerTest, AStageIsNamedOnlyAsAWordOfItsOwn) {
  EXPECT_EQ(TimeLedger::Kind("running task2b on 4 ranks").second, "task2b");
  EXPECT_EQ(TimeLedger::Kind("running the grader's own task7 on 2 ranks with --x=1").second, "task7");
  EXPECT_EQ(TimeLedger::Kind("running the grader's own data-parallel run on 4 ranks at 512 tokens").second,
            "shared");
  EXPECT_EQ(TimeLedger::Kind("writing the ViT's CIFAR-10-format images").first, "other");
}

TEST(TimeLedgerTest, NoLinesNoSummary) { EXPECT_EQ(TimeLedger().Summary(5), ""); }

}  // namespace
}  // namespace distlm::grading
