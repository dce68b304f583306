// Task 6: fully sharded data parallelism (ZeRO-3, FSDP) with the student's gather, reshard,
// reduce-scatter and sharded step, on part 1's backward and evaluation. Built twice: with
// reference/ and with student/ (see BUILD).
#include "common/train/run_stage.h"
#include "part1/train_step.h"
#include "task6/fsdp_stage.h"

int main(int argc, char** argv) {
  return distlm::train::RunStageMain(argc, argv, distlm::task6::MakeFsdpStage("task6", distlm::part1::MakeTrainStep()));
}
