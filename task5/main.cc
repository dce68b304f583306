// Task 5: sharded data parallelism (ZeRO-2) with the student's sharded update, on part 1's
// backward and evaluation. Built twice: with reference/ and with student/ (see BUILD).
#include "common/zero/zero_stage.h"
#include "part1_single/train_step.h"
#include "task5/sharded_step.h"

int main(int argc, char** argv) {
  // Part 1's backward and end of epoch; the student's sharded update instead of its step.
  distlm::zero::ZeroStage stage("task5", distlm::part1::MakeTrainStep(), distlm::task5::ShardedStep);
  return distlm::zero::RunZeroStage(argc, argv, stage);
}
