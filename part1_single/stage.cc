#include "part1_single/stage.h"

#include <string>
#include <utility>

#include "common/dist/dist_flags.h"
#include "common/runtime/errors.h"

namespace distlm::part1 {
namespace {

class SingleProcessStage : public train::Stage {
 public:
  using Stage::Stage;
  train::DistInfo Connect() override {
    const dist::DistConfig config = dist::DistConfigFromFlagsAndEnv();
    if (config.world_size != 1) {
      throw UserError(name() + " trains on one process, but " + config.world_size_origin +
                      "; use task2a, task2b or task3 for several ranks");
    }
    return {};
  }
};

}  // namespace

std::unique_ptr<train::Stage> MakeStage(train::TrainStep step) {
  return std::make_unique<SingleProcessStage>("part1_single", std::move(step));
}

}  // namespace distlm::part1
