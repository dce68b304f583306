// Task 7a: tensor parallelism (Megatron-LM's layout) with the student's column- and
// row-parallel linears, on part 1's step. Built with reference/ and with student/ (see BUILD).
#include "common/train/run_stage.h"
#include "part1/train_step.h"
#include "task7/tp_stage.h"

int main(int argc, char** argv) {
  return distlm::train::RunStageMain(argc, argv,
                                     distlm::task7::MakeTensorParallelStage("task7", distlm::part1::MakeTrainStep()));
}
