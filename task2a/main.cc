// Task 2a: data-parallel training with the student's gradient synchronisation, on part 1's
// training step. Built twice: reference/ with part 1's reference, student/ with the student's
// part 1 (see BUILD).
#include "common/stages/gradient_sync_stage.h"
#include "common/train/run_stage.h"
#include "part1/train_step.h"
#include "task2a/grad_sync.h"

int main(int argc, char** argv) {
  return distlm::train::RunStageMain(
      argc, argv, distlm::stages::MakeGradientSyncStage("task2a", distlm::part1::MakeTrainStep(), distlm::task2a::SyncGradients));
}
