// Task 3: data-parallel training with the student's own DistributedDataParallel (task3/ddp.h),
// on part 1's training step. Built twice: with reference/ and with student/ (see BUILD).
#include "common/train/run_stage.h"
#include "part1/train_step.h"
#include "task3/ddp_stage.h"

int main(int argc, char** argv) {
  return distlm::train::RunStageMain(argc, argv, distlm::task3::MakeDdpStage("task3", distlm::part1::MakeTrainStep()));
}
