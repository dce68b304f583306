// Part 1: single-node fine-tuning. Built twice: with reference/ (the solution) and with
// student/ (the TODO stubs); see BUILD.
#include "common/train/distributed.h"
#include "common/train/trainer.h"
#include "part1_single/train_step.h"

int main(int argc, char** argv) {
  // Part 1 is the plain Stage: part 1's three pieces and nothing else.
  distlm::train::Stage stage("part1_single", distlm::part1::MakeTrainStep());
  // Accepts --master_ip/--world_size/... like every stage, but only world size 1.
  return distlm::train::RunGlueMain(argc, argv, stage,
                                    [] { return distlm::train::SingleProcessFromFlags("part1_single"); });
}
