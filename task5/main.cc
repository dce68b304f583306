// Task 5: sharded data parallelism, ZeRO stage 2 (optimizer state and gradients split across
// ranks). Built twice: with reference/ and with student/ (see BUILD).
#include "common/zero/zero_stage.h"
#include "task5/sharded_step.h"

int main(int argc, char** argv) { return distlm::zero::RunZeroStage(argc, argv, "task5", distlm::task5::ShardedStep); }
