// main() of every stage: `return RunStageMain(argc, argv, MakeStage(...));`.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/train/stage.h"

namespace distlm::train {

// Parses the flags, sets up the runtime, checks --device, connects the ranks
// (stage.Connect()), then builds the Trainer for this stage and runs it. Errors become one
// line (naming the lost rank where a collective failed) and a non-zero exit.
int RunStageMain(int argc, char** argv, Stage& stage);
int RunStageMain(int argc, char** argv, std::unique_ptr<Stage> stage);
// The same for a stage that depends on the flags: `make` runs once they are parsed (task 7's
// --model_parallel picks its stage). `name` names the program until then.
int RunStageMain(int argc, char** argv, const std::string& name, const std::function<std::unique_ptr<Stage>()>& make);

}  // namespace distlm::train
