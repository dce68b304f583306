// Part 1: single-node fine-tuning. Built twice: with reference/ (the solution) and with
// student/ (the TODO stubs); see BUILD.
#include "common/train/distributed.h"
#include "common/train/trainer.h"
#include "part1_single/train_step.h"

int main(int argc, char** argv) {
  distlm::train::StageHooks hooks;
  hooks.stage = "part1_single";
  distlm::part1::UseTrainStep(hooks);
  // Accepts --master_ip/--world_size/... like every stage, but only world size 1.
  return distlm::train::RunGlueMain(argc, argv, hooks,
                                    [] { return distlm::train::SingleProcessFromFlags("part1_single"); });
}
