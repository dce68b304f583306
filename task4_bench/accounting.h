// Training traffic, accounted: which gradient tensors a data-parallel update communicates, what
// the network must carry for them (traffic.h's formulas summed over ranks), and the figures of
// a stage's train_log.jsonl that the scaling report (report.cc) tabulates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>
#include <torch/nn/module.h>

#include "common/bert/bert_config.h"
#include "common/stages/stages.h"

namespace distlm::task4_bench {

// One gradient of BertForSequenceClassification, in registration order (the order of the
// trainer's parameter list, which tasks 2a/2b hand the student and task 3 buckets).
struct GradientTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
};

// Every trainable parameter of the model `config` describes: each update communicates exactly
// one gradient per parameter.
std::vector<GradientTensor> GradientTensors(const bert::BertConfig& config);
// The same for any model (the ViT of --model=vit).
std::vector<GradientTensor> GradientTensors(torch::nn::Module& model);

int64_t TotalNumel(const std::vector<GradientTensor>& tensors);

// Bytes per element of a --comm_dtype value (fp32 4, fp16 and bf16 2); UserError otherwise.
int64_t CommDtypeBytes(const std::string& comm_dtype);

// How a stage synchronises its gradients (and, for task 5, its parameters).
//   kRingAllreduce           tasks 2b, 3
//   kGatherScatter           task 2a
//   kReduceScatterAllGather  task 5 on a backend with reduce_scatter (the MPI group): ring
//                            reduce-scatter of the gradient, ring all-gather of the updated
//                            parameters, (N-1)/N x S each: the bytes of one ring all_reduce
//   kAllreduceAllGather      task 5 on Gloo (LibTorch 1.13 has no reduce_scatter there): a full
//                            all_reduce of the gradient, then the all-gather: 3(N-1)/N x S
//   kAllreduceTwoAllGathers  task 6 on Gloo: per unit, the parameters all-gathered twice (forward,
//                            backward) and the gradient all_reduced: 4(N-1)/N x S (with a
//                            native reduce-scatter it would be 3(N-1)/N x S)
// Task 5's S is the flat buffer, padded to a multiple of N elements; task 6's the units' buffers,
// each padded so (the report counts the whole model padded once: at most N-1 elements per unit
// more in the real run).
using SyncPattern = stages::SyncPattern;  // kNone: a stage that communicates nothing

// True for task 5's patterns (their buffer is padded to N equal shards).
bool IsSharded(SyncPattern pattern);

// ExpectedTrafficPerUpdate (bytes per update for each pattern) is in traffic.h.

// A stage's train_log.jsonl (rank 0's lines), summarised.
struct LogSummary {
  int64_t updates = 0;
  // Means over updates 2.. (update 1 carries one-time costs: allocation, first-touch, the
  // gradient buckets' first fill); over update 1 when it is the only one.
  double step_ms = 0;
  double comm_ms = 0;
  double samples_per_s = 0;  // global samples per update / mean step time
  double comm_share = 0;     // comm_ms / step_ms
  // Of the first update (the same every update, for the stages here).
  int64_t comm_bytes = 0;  // payload rank 0 handed collectives during the gradient sync
  int64_t comm_calls = 0;
  int64_t comm_tensors = 0;
  std::string comm_dtype;  // "float32", ...
  // Optimizer-state bytes (AdamW's two moments) rank 0 holds, from the log's opt_state_bytes
  // (task 5); -1 when the log does not say (the other stages keep the whole state: 8 x P).
  int64_t opt_state_bytes = -1;
  std::vector<double> losses;
};

// Throws distlm::UserError naming `source` for an empty log or a line without the fields.
LogSummary SummarizeTrainLog(const std::string& jsonl, const std::string& source);

// throughput_N / (N * throughput_1): 1 when N ranks are N times as fast as one.
double ScalingEfficiency(double throughput_n, int world_size, double throughput_1);

}  // namespace distlm::task4_bench
