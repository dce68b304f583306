#include "task7/model_parallel_stage.h"

#include <utility>

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"
#include "common/train/run_stage.h"
#include "task7/pp_stage.h"
#include "task7/schedule_probe.h"
#include "task7/tp_stage.h"

ABSL_FLAG(std::string, model_parallel, "tensor",
          "task7: tensor (7a: the layers' products split over the ranks; 7c with --tensor_parallel_size) or "
          "pipeline (7b: the layers cut into stages, --micro_batches, --pipeline_schedule)");

namespace distlm::task7 {

std::unique_ptr<train::Stage> MakeModelParallelStage(std::string name, train::TrainStep step) {
  const std::string kind = absl::GetFlag(FLAGS_model_parallel);
  if (kind == "tensor") return MakeTensorParallelStage(std::move(name), std::move(step));
  if (kind == "pipeline") return MakePipelineParallelStage(std::move(name), std::move(step));
  throw UserError("--model_parallel=" + kind + " is not tensor or pipeline");
}

int RunModelParallelMain(int argc, char** argv, const std::string& name, train::TrainStep step) {
  if (int code = 0; RunScheduleProbeIfAsked(argc, argv, &StageSteps, &code)) return code;
  return train::RunStageMain(argc, argv, name, [&] { return MakeModelParallelStage(name, step); });
}

}  // namespace distlm::task7
