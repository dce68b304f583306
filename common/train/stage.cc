#include "common/train/stage.h"

#include <stdexcept>

namespace distlm::train {

nlohmann::json UpdateFigures::ToJson() const {
  nlohmann::json j = nlohmann::json::object();
  if (comm) {
    j = comm->ToJson();
    j["comm_time_ms"] = comm_time_ms;
  }
  if (overlap) {
    j["comm_busy_ms"] = overlap->busy_ms;
    j["comm_hidden_ms"] = overlap->hidden_ms;
    j["comm_exposed_ms"] = overlap->busy_ms - overlap->hidden_ms;
    j["backward_overlap_ms"] = overlap->backward_ms;
    j["buckets"] = overlap->buckets;
    j["buckets_started_before_backward_end"] = overlap->started_before_backward_end;
    j["no_sync_calls"] = overlap->no_sync_calls;
  }
  if (shard) {
    j["opt_state_bytes"] = shard->opt_state_bytes;
    j["opt_state_bytes_per_rank"] = shard->opt_state_bytes_per_rank;
    j["grad_bytes"] = shard->grad_bytes;
    j["grad_buffer_bytes"] = shard->grad_buffer_bytes;
    j["shard_numel"] = shard->shard_numel;
    j["padding"] = shard->padding;
    j["reduce_scatter"] = shard->reduce_scatter;
  }
  return j;
}

Stage::Stage(std::string name, TrainStep step) : name_(std::move(name)), step_(std::move(step)) {
  if (!step_.backward || !step_.optimizer_step || !step_.end_of_epoch) {
    throw std::logic_error(name_ + ": a stage needs part 1's backward, optimizer step and end of epoch "
                                   "(part1::MakeTrainStep())");
  }
}

Stage::~Stage() = default;

BertAdamW::State Stage::GatherOptimizerState(Trainer&) {
  throw std::logic_error(name_ + " does not shard its optimizer state");
}

void Stage::LoadOptimizerState(Trainer&, const BertAdamW::State&) {
  throw std::logic_error(name_ + " does not shard its optimizer state");
}

}  // namespace distlm::train
