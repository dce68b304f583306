// Task 7: model parallelism on part 1's step. --model_parallel=tensor (the default: 7a's
// column- and row-parallel linears; 7c with --tensor_parallel_size) or pipeline (7b's schedules
// and loop). Built with reference/ and with student/ (see BUILD).
#include "part1/train_step.h"
#include "task7/model_parallel_stage.h"

int main(int argc, char** argv) {
  return distlm::task7::RunModelParallelMain(argc, argv, "task7", distlm::part1::MakeTrainStep());
}
