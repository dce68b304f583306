// Task 5: sharded data parallelism (ZeRO-2) with the student's sharded update, on part 1's
// backward and evaluation. Built twice: with reference/ and with student/ (see BUILD).
#include "common/zero/zero_stage.h"
#include "part1_single/train_step.h"
#include "task5/sharded_step.h"

int main(int argc, char** argv) {
  distlm::train::StageHooks hooks = distlm::zero::ZeroStageHooks("task5", distlm::task5::ShardedStep);
  distlm::part1::UseTrainStep(hooks);  // keeps the sharded optimizer step
  return distlm::zero::RunZeroStage(argc, argv, hooks);
}
