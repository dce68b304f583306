// main() of every stage: `return RunStageMain(argc, argv, MakeStage(...));`.
#pragma once

#include <memory>

#include "common/train/stage.h"

namespace distlm::train {

// Parses the flags, sets up the runtime, checks --device, connects the ranks
// (stage.Connect()), then builds the Trainer for this stage and runs it. Errors become one
// line (naming the lost rank where a collective failed) and a non-zero exit.
int RunStageMain(int argc, char** argv, Stage& stage);
int RunStageMain(int argc, char** argv, std::unique_ptr<Stage> stage);

}  // namespace distlm::train
