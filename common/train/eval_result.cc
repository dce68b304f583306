#include "common/train/eval_result.h"

#include <utility>

namespace distlm::train {

using nlohmann::json;

EvalResult EvalResult::FromJson(const json& e) {
  EvalResult r;
  r.epoch = e.at("epoch").get<int64_t>();
  r.examples = e.at("examples").get<int64_t>();
  for (auto [field, key] : {std::pair{&r.loss, "loss"}, {&r.accuracy, "accuracy"},
                            {&r.samples_per_s, "samples_per_s"}, {&r.epoch_time_s, "epoch_time_s"},
                            {&r.train_samples_per_s, "train_samples_per_s"}}) {
    *field = e.at(key).get<double>();
  }
  r.binary_metrics = e.contains("f1");
  if (r.binary_metrics) {
    for (auto [field, key] : {std::pair{&r.f1, "f1"}, {&r.precision, "precision"}, {&r.recall, "recall"}, {&r.mcc, "mcc"}}) {
      *field = e.at(key).get<double>();
    }
  }
  // Whatever else the task's Metrics() wrote (ToJson merged it in) goes back to `extra`.
  const json known = r.ToJson();
  for (const auto& [key, value] : e.items()) {
    if (!known.contains(key)) r.extra[key] = value;
  }
  return r;
}

json EvalResult::ToJson() const {
  json j = {{"epoch", epoch},
            {"examples", examples},
            {"loss", loss},
            {"accuracy", accuracy},
            {"samples_per_s", samples_per_s},
            {"epoch_time_s", epoch_time_s},
            {"train_samples_per_s", train_samples_per_s}};
  if (binary_metrics) {
    j["f1"] = f1;
    j["precision"] = precision;
    j["recall"] = recall;
    j["mcc"] = mcc;
  }
  for (const auto& [key, value] : extra.items()) j[key] = value;
  return j;
}

}  // namespace distlm::train
