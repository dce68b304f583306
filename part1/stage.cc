#include "part1/stage.h"

#include <string>
#include <utility>


namespace distlm::part1 {
namespace {

class SingleProcessStage : public train::Stage {
 public:
  using Stage::Stage;
  train::DistInfo Connect() override { return ConnectOneProcess("; use task2a, task2b or task3 for several ranks"); }
};

}  // namespace

std::unique_ptr<train::Stage> MakeStage(train::TrainStep step) {
  return std::make_unique<SingleProcessStage>("part1", std::move(step));
}

}  // namespace distlm::part1
