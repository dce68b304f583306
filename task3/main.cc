// Task 3: data-parallel training with the model wrapped in DistributedDataParallel.
// Built twice: with reference/ and with student/ (see BUILD).
#include "common/train/ddp_stage.h"
#include "task3/ddp_wrap.h"

int main(int argc, char** argv) { return distlm::train::RunDdpStage(argc, argv, "task3", distlm::task3::WrapModel); }
