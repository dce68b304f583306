#include "common/train/stage.h"

#include <stdexcept>

#include "common/dist/dist_flags.h"
#include "common/runtime/errors.h"
#include "common/train/bert_adamw.h"

namespace distlm::train {

nlohmann::json UpdateFigures::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (comm) {
    j = comm->ToJson();
    j["comm_time_ms"] = comm_time_ms;
  }
  for (const auto& [key, value] : fields.items()) j[key] = value;
  return j;
}

Stage::Stage(std::string name, TrainStep step) : name_(std::move(name)), step_(std::move(step)) {
  if (!step_.backward || !step_.optimizer_step || !step_.end_of_epoch) {
    throw std::logic_error(name_ + ": a stage needs part 1's backward, optimizer step and end of epoch "
                                   "(part1::MakeTrainStep())");
  }
}

Stage::~Stage() = default;

DistInfo Stage::ConnectOneProcess(const std::string& hint) const {
  const dist::DistConfig config = dist::DistConfigFromFlagsAndEnv();
  if (config.world_size != 1) {
    throw UserError(name_ + " trains on one process, but " + config.world_size_origin + hint);
  }
  return DistInfo{};
}

std::unique_ptr<Optimizer> Stage::MakeOptimizer(const StageContext& ctx) {
  return std::make_unique<BertAdamW>(ctx.named_parameters(), AdamWOptionsFor(ctx.options()));
}

}  // namespace distlm::train
