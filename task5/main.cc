// Task 5: sharded data parallelism (ZeRO-2) with the student's sharded update, on part 1's
// backward and evaluation. Built twice: with reference/ and with student/ (see BUILD).
#include "common/train/run_stage.h"
#include "part1/train_step.h"
#include "task5/sharded_step.h"
#include "task5/zero_stage.h"

int main(int argc, char** argv) {
  // Part 1's backward and end of epoch; the student's sharded update instead of its step.
  return distlm::train::RunStageMain(
      argc, argv, distlm::task5::MakeZeroStage("task5", distlm::part1::MakeTrainStep(), distlm::task5::ShardedStep));
}
