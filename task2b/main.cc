// Task 2b: data-parallel training with the student's gradient synchronisation, on part 1's
// training step. Built twice: reference/ with part 1's reference, student/ with the student's
// part 1 (see BUILD).
#include "common/train/distributed.h"
#include "part1_single/train_step.h"
#include "task2b/grad_sync.h"

int main(int argc, char** argv) {
  distlm::train::GradientSyncStage stage("task2b", distlm::part1::MakeTrainStep(), distlm::task2b::SyncGradients);
  return distlm::train::RunGradientSyncStage(argc, argv, stage);
}
