// Task 2b: data-parallel training, gradients averaged with all_reduce.
// Built twice: with reference/ and with student/ (see BUILD).
#include "common/train/distributed.h"
#include "task2b/grad_sync.h"

int main(int argc, char** argv) {
  return distlm::train::RunGradientSyncStage(argc, argv, "task2b", distlm::task2b::SyncGradients);
}
