// One evaluation on the dev split, as eval_results.json and snapshots record it.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace distlm::train {

struct EvalResult {
  int64_t epoch = 0;  // 1-based; 0 for an evaluation without training
  int64_t examples = 0;
  double loss = 0, accuracy = 0;
  // Binary classification's (GLUE); a task with more classes has none of them.
  bool binary_metrics = true;
  double f1 = 0, precision = 0, recall = 0, mcc = 0;
  nlohmann::json extra = nlohmann::json::object();  // the task's other metrics (per class, confusion)
  double samples_per_s = 0;        // evaluation throughput
  double epoch_time_s = 0;         // training time of the epoch
  double train_samples_per_s = 0;  // training throughput of the epoch, all ranks together
  nlohmann::json ToJson() const;
  static EvalResult FromJson(const nlohmann::json& j);  // what ToJson wrote; throws on a missing field
};

}  // namespace distlm::train
