// --fp16 in task 6 on 2 ranks: the loss scaler checks each rank's own gradient shards, so one
// rank's overflow is voted on and both skip (common/testing/overflow_vote.h says how it is
// checked, and why on the 2.x line only).
#include "common/testing/overflow_vote.h"

namespace {

TEST(Task6Fp16Test, OneRanksOverflowSkipsTheUpdateOnEveryRank) {
  distlm::testing::ExpectOneRanksOverflowSkipsTheUpdateOnEveryRank("task6");
}

}  // namespace
