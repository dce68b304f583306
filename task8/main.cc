// Task 8a: local SGD and DiLoCo on part 1's training step. Built with reference/ (BUILD).
#include "common/train/run_stage.h"
#include "part1/train_step.h"
#include "task8/local_sgd_stage.h"
#include "task8/outer_loop.h"

int main(int argc, char** argv) {
  return distlm::train::RunStageMain(
      argc, argv, distlm::task8::MakeLocalSgdStage(distlm::part1::MakeTrainStep(), distlm::task8::MakeOuterLoop));
}
