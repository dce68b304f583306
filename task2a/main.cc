// Task 2a: data-parallel training with the student's gradient synchronisation, on part 1's
// training step. Built twice: reference/ with part 1's reference, student/ with the student's
// part 1 (see BUILD).
#include "common/train/distributed.h"
#include "part1_single/train_step.h"
#include "task2a/grad_sync.h"

int main(int argc, char** argv) {
  distlm::train::GradientSyncStage stage("task2a", distlm::part1::MakeTrainStep(), distlm::task2a::SyncGradients);
  return distlm::train::RunGradientSyncStage(argc, argv, stage);
}
