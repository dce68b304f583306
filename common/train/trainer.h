// The training loop every stage shares.
//
// The Trainer owns the loop: epochs over a DistributedSampler, forward, loss, logging and
// evaluation. A stage (stage.h) is called at named points of it; every stage carries part 1's
// backward / optimizer step / end of epoch (part1::MakeTrainStep()).
//
// One step, as data: this rank's example indices -> the task's forward (model_task.h) -> loss -> stage.Backward ->
// stage.SyncGradients (tasks 2a/2b/3) -> stage.OptimizerStep (clip, AdamW, schedule) ->
// stage.TakeFigures -> one JSON line in train_log.jsonl (rank 0; loss averaged over ranks).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include "common/train/mixed_precision.h"
#include "common/train/model_task.h"
#include "common/train/bert_adamw.h"
#include "common/train/schedule.h"
#include "common/train/snapshot.h"
#include "common/train/stage.h"
#include "common/train/train_options.h"

namespace distlm::train {

class Trainer;


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

// The process group a distributed stage trains over; empty for one process.
struct DistInfo {
  c10::intrusive_ptr<c10d::ProcessGroup> pg;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // picks the GPU under --device=cuda
  std::string backend = "none";
  std::string described;  // how the ranks were started and found each other (rank 0 prints it)
  // Throws a one-line UserError on every rank when ranks disagree on (what, value).
  std::function<void(const std::string& what, const std::string& value)> check_agreement;
  // Turns a failed collective into a message naming the lost rank.
  std::function<std::string(const std::exception&)> describe_failure;
  std::shared_ptr<void> keep_alive;  // whatever owns the group (store, heartbeat, ...)
};


class Trainer {
 public:
  // `stage` outlives the Trainer.
  Trainer(TrainOptions options, Stage& stage, DistInfo dist);

  // Loads data and model, prepares the output folder. Called by Run; public for tests.
  void Setup();
  // Setup, then train and/or evaluate as the options say, then save the model (rank 0).
  void Run();
  // Evaluates on the dev split (rank 0 computes; other ranks get an empty result) and records
  // the result in eval_results.json.
  EvalResult Evaluate(int64_t epoch);

  // The model (BERT or ViT: the stages do not care which).
  torch::nn::Module& module() { return task_->module(); }
  // The model's parameters in registration order (what gradients are synchronised over).
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }
  const TrainOptions& options() const { return options_; }
  const DistInfo& dist() const { return dist_; }
  BertAdamW& optimizer() { return *optimizer_; }
  const std::string& output_dir() const { return options_.output_dir; }
  const std::vector<double>& losses() const { return losses_; }
  const std::vector<EvalResult>& eval_results() const { return eval_results_; }
  bool is_main_rank() const { return dist_.rank == 0; }
  // Where model, batches and optimizer state live (--device; set by Setup).
  const torch::Device& device() const { return device_; }

 private:
  void Train();
  void PrepareOutputDir();
  void LogUpdate(int64_t step, int64_t epoch, double loss, double lr, double grad_norm, double step_ms,
                 int64_t samples, std::optional<double> loss_scale, bool skipped);
  double AverageOverRanks(double value);
  void MaybeInjectFault(int64_t update) const;
  // --fp16: unscales the gradients; false (gradients dropped) when they overflowed.
  bool UnscaleGradients(int64_t update);
  // Sets every gradient to none (an overflowed update, an epoch's incomplete accumulation).
  void DropGradients();
  // Snapshots (see snapshot.h): what a resume must agree on, the tensors saved, writing one,
  // and resuming from the newest valid one (rank 0 reads, every rank receives).
  nlohmann::json Fingerprint() const;
  // `gathered` holds the moments a gather_optimizer_state hook returned (the tensors share them).
  NamedTensors SnapshotTensors(BertAdamW::State& gathered);
  void Snapshot(const TrainingState& state);
  std::optional<TrainingState> TryResume(LinearSchedule& schedule);

  TrainOptions options_;
  Stage& stage_;
  DistInfo dist_;
  torch::Device device_{torch::kCPU};
  std::unique_ptr<ModelTask> task_;
  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<BertAdamW> optimizer_;
  std::vector<double> losses_;
  std::vector<double> step_ms_;
  std::vector<EvalResult> eval_results_;
  double last_epoch_time_s_ = 0;
  double last_epoch_samples_per_s_ = 0;
  bool terminal_ = false;             // stdout is a terminal: progress lines redrawn in place
  class ProgressLine* progress_ = nullptr;
  Precision precision_ = Precision::kFp32;  // --bf16 / --fp16 (set by Setup)
  LossScaler scaler_{false};                // --fp16's; the identity otherwise  // training's, while Train() runs (evaluation ends its line)
  bool setup_done_ = false;
};

// The whole command: parse flags, run the preamble, build the Trainer for this stage and run
// it; errors become one line and a non-zero exit. `make_dist` creates the process group for
// distributed stages (null for part 1, which accepts only world size 1).
int RunGlueMain(int argc, char** argv, Stage& stage, std::function<DistInfo()> make_dist = nullptr);

}  // namespace distlm::train
