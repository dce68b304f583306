#include "common/train/run_stage.h"

#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/runtime/device.h"
#include "common/runtime/errors.h"
#include "common/runtime/runtime_flags.h"
#include "common/train/trainer.h"

namespace distlm::train {

namespace {

int Run(int argc, char** argv, const std::string& name, const std::function<Stage&()>& stage_after_flags) {
  absl::SetProgramUsageMessage("distlm " + name +
                               ": fine-tune BERT on a GLUE task, or a ViT on CIFAR-10 (flags mirror run_glue.py)");
  return RunMain([&]() -> int {
    auto rest = absl::ParseCommandLine(argc, argv);
    if (rest.size() > 1) throw UserError("unexpected argument '" + std::string(rest[1]) + "' (flags are --name=value)");
    runtime::InitRuntimeFromFlags();
    TrainOptions options = TrainOptionsFromFlags();
    // A --device this machine cannot give fails here, on every rank, before any rendezvous.
    runtime::ResolveDevice(options.device, /*local_rank=*/0);
    Stage& stage = stage_after_flags();
    DistInfo dist = stage.Connect();
    Trainer trainer(options, stage, dist);
    try {
      trainer.Run();
    } catch (const UserError&) {
      throw;
    } catch (const std::exception& e) {
      if (dist.describe_failure) throw UserError(dist.describe_failure(e));
      throw;
    }
    return 0;
  });
}

}  // namespace

int RunStageMain(int argc, char** argv, Stage& stage) {
  return Run(argc, argv, stage.name(), [&]() -> Stage& { return stage; });
}

int RunStageMain(int argc, char** argv, const std::string& name, const std::function<std::unique_ptr<Stage>()>& make) {
  std::unique_ptr<Stage> stage;
  return Run(argc, argv, name, [&]() -> Stage& {
    stage = make();
    return *stage;
  });
}

int RunStageMain(int argc, char** argv, std::unique_ptr<Stage> stage) { return RunStageMain(argc, argv, *stage); }

}  // namespace distlm::train
