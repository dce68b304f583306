#include "task4_bench/accounting.h"

#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/types.h>
#include <torch/nn/module.h>

#include "common/bert/bert_model.h"
#include "common/runtime/errors.h"
#include "task4_bench/traffic.h"

namespace distlm::task4_bench {

std::vector<GradientTensor> GradientTensors(const bert::BertConfig& config) {
  bert::BertForSequenceClassification model(config);
  return GradientTensors(*model);
}

std::vector<GradientTensor> GradientTensors(torch::nn::Module& model) {
  std::vector<GradientTensor> out;
  for (const auto& p : model.named_parameters()) {
    if (!p.value().requires_grad()) continue;
    GradientTensor t;
    t.name = p.key();
    t.shape.assign(p.value().sizes().begin(), p.value().sizes().end());
    t.numel = p.value().numel();
    out.push_back(std::move(t));
  }
  return out;
}

int64_t TotalNumel(const std::vector<GradientTensor>& tensors) {
  int64_t n = 0;
  for (const auto& t : tensors) n += t.numel;
  return n;
}

int64_t CommDtypeBytes(const std::string& comm_dtype) {
  if (comm_dtype == "fp32") return 4;
  if (comm_dtype == "fp16" || comm_dtype == "bf16") return 2;
  throw UserError("comm dtype '" + comm_dtype + "' is not fp32, fp16 or bf16");
}

bool IsSharded(SyncPattern pattern) {
  return pattern == SyncPattern::kReduceScatterAllGather || pattern == SyncPattern::kAllreduceAllGather ||
         pattern == SyncPattern::kAllreduceTwoAllGathers;
}

LogSummary SummarizeTrainLog(const std::string& jsonl, const std::string& source) {
  LogSummary s;
  std::istringstream lines(jsonl);
  double step_sum = 0, comm_sum = 0, samples_sum = 0;
  int64_t timed = 0, line_no = 0;
  std::vector<nlohmann::json> all;
  for (std::string line; std::getline(lines, line);) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("step_time_ms") || !j.contains("loss")) {
      throw UserError(source + ": line " + std::to_string(line_no) + " is not an update's log line");
    }
    all.push_back(std::move(j));
  }
  if (all.empty()) throw UserError(source + ": no updates logged");
  s.updates = static_cast<int64_t>(all.size());
  const nlohmann::json& first = all.front();
  s.comm_bytes = first.value("comm_bytes", int64_t{0});
  s.comm_calls = first.value("comm_calls", int64_t{0});
  s.comm_tensors = first.value("comm_tensors", int64_t{0});
  s.comm_dtype = first.value("comm_dtype", std::string());
  // What the rank holds of AdamW's state: every stage's held_opt_bytes (older logs: task 5's
  // opt_state_bytes).
  s.opt_state_bytes = first.value("held_opt_bytes", first.value("opt_state_bytes", int64_t{-1}));
  for (size_t i = 0; i < all.size(); ++i) {
    s.losses.push_back(all[i]["loss"].get<double>());
    if (i == 0 && all.size() > 1) continue;
    const double step = all[i]["step_time_ms"].get<double>();
    step_sum += step;
    comm_sum += all[i].value("comm_time_ms", 0.0);
    // samples_per_s = samples / step: the update's global samples.
    samples_sum += all[i]["samples_per_s"].get<double>() * step / 1000.0;
    ++timed;
  }
  s.step_ms = step_sum / timed;
  s.comm_ms = comm_sum / timed;
  s.samples_per_s = samples_sum / (step_sum / 1000.0);
  s.comm_share = s.step_ms > 0 ? s.comm_ms / s.step_ms : 0;
  return s;
}

double ScalingEfficiency(double throughput_n, int world_size, double throughput_1) {
  if (world_size < 1 || !(throughput_1 > 0)) return 0;
  return throughput_n / (world_size * throughput_1);
}

}  // namespace distlm::task4_bench
