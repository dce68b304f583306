// Task 7's stage as its binaries run it: --model_parallel=tensor (7a, and 7c with
// --tensor_parallel_size) or pipeline (7b), chosen once the flags are parsed.
#pragma once

#include <memory>
#include <string>

#include "common/train/stage.h"

namespace distlm::task7 {

// The stage --model_parallel names (a UserError for another value).
std::unique_ptr<train::Stage> MakeModelParallelStage(std::string name, train::TrainStep step);

// main() of task 7's binaries: RunStageMain with the stage above.
int RunModelParallelMain(int argc, char** argv, const std::string& name, train::TrainStep step);

}  // namespace distlm::task7
