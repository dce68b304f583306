// --fp16 in task 5 on 2 ranks: task 5's gradients differ between ranks until its sharded step
// synchronises them, so one rank's overflow is voted on and both skip (common/testing/
// overflow_vote.h says how it is checked, and why on the 2.x line only).
#include "common/testing/overflow_vote.h"

namespace {

TEST(Task5Fp16Test, OneRanksOverflowSkipsTheUpdateOnEveryRank) {
  distlm::testing::ExpectOneRanksOverflowSkipsTheUpdateOnEveryRank("task5");
}

}  // namespace
