// Part 1: single-node fine-tuning. Built twice: with reference/ (the solution) and with
// student/ (the TODO stubs); see BUILD.
#include "common/train/run_stage.h"
#include "part1/stage.h"
#include "part1/train_step.h"

int main(int argc, char** argv) {
  return distlm::train::RunStageMain(argc, argv, distlm::part1::MakeStage(distlm::part1::MakeTrainStep()));
}
