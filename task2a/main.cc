// Task 2a: data-parallel training, gradients averaged through rank 0 with gather + scatter.
// Built twice: with reference/ and with student/ (see BUILD).
#include "common/train/distributed.h"
#include "task2a/grad_sync.h"

int main(int argc, char** argv) {
  return distlm::train::RunGradientSyncStage(argc, argv, "task2a", distlm::task2a::SyncGradients);
}
