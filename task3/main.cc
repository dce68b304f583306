// Task 3: data-parallel training with the student's own DistributedDataParallel (task3/ddp.h),
// on part 1's training step. Built twice: with reference/ and with student/ (see BUILD).
#include "part1_single/train_step.h"
#include "task3/ddp_stage.h"

int main(int argc, char** argv) {
  distlm::task3::DdpStage stage("task3", distlm::part1::MakeTrainStep());
  return distlm::task3::RunDdpStage(argc, argv, stage);
}
