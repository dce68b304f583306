// The training loop every stage shares.
//
// The Trainer owns the loop: epochs over a DistributedSampler, forward, loss, logging,
// evaluation and snapshots. A stage (stage.h) is called at named points of it with a
// StageContext, and provides the optimizer; the Trainer has no branch on which stage it runs.
//
// One step, as data: this rank's example indices -> the task's forward (model_task.h) -> loss -> stage.Backward ->
// stage.SyncGradients (tasks 2a/2b/3) -> stage.OptimizerStep (clip, the stage's optimizer, schedule) ->
// stage.TakeFigures -> one JSON line in train_log.jsonl (rank 0; the loss averaged over ranks, or rank 0's own where the
// stage says so).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "common/tensorboard/event_writer.h"
#include "common/trace/recorder.h"
#include "common/train/dist_info.h"
#include "common/train/eval_result.h"
#include "common/train/mixed_precision.h"
#include "common/train/model_task.h"
#include "common/train/optimizer.h"
#include "common/train/schedule.h"
#include "common/train/snapshot.h"
#include "common/train/stage.h"
#include "common/train/train_options.h"

namespace distlm::train {

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

  // The model's parameters in registration order (what gradients are synchronised over).
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }
  const TrainOptions& options() const { return options_; }
  const DistInfo& dist() const { return dist_; }
  const std::string& output_dir() const { return options_.output_dir; }
  const std::vector<double>& losses() const { return losses_; }
  const std::vector<EvalResult>& eval_results() const { return eval_results_; }
  bool is_main_rank() const { return dist_.rank == 0; }
  // Ranks that read different examples: the world, or 1 where every rank reads every batch.
  // The replicas this run trains (part 1 on one shard of several trains one).
  int DataReplicas() const { return std::min(stage_.data_share(dist_).replicas, dist_.world_size); }
  // Where model, batches and optimizer state live (--device; set by Setup).
  const torch::Device& device() const { return device_; }

 private:
  void Train();
  // Where training stands between epochs (and after a resume).
  struct Position {
    int64_t update = 0;            // updates done
    int64_t minibatch = 0;         // micro-batches done in the whole run
    int64_t skip = 0;              // batches of the epoch consumed before the snapshot resumed from
    int64_t progress_samples = 0;  // every rank's examples since this run (or resume) began
  };
  // One epoch's updates over `batches` (this rank's), until the epoch ends or `total` updates
  // are done: each micro-batch's forward and backward, then each update's end and snapshot.
  void TrainEpoch(int64_t epoch, const std::vector<std::vector<int64_t>>& batches, int64_t total, UpdateContext& u,
                  Position* at);
  // One micro-batch's forward (under autocast) and the stage's backward; its loss.
  double ForwardBackward(const std::vector<int64_t>& indices, int64_t epoch, bool last_micro_batch);
  // --trace: the recorder (and the ranks' clocks on one line), whether update `update` is traced,
  // this rank's memory as a counter, and the rank's file once the traced updates are done.
  void StartTrace();
  bool Traced(int64_t update) const {
    return trace_ && update >= options_.trace_first && update <= options_.trace_last;
  }
  void TraceMemory();
  void WriteTrace();
  // Evaluate's and Run's work on the whole model, inside the stage's WithFullParameters.
  EvalResult EvaluateWhole(int64_t epoch);
  void SaveModel();
  // Rank 0's lines before the first update (sizes, precision, how the ranks met) and after the
  // last (the mean iteration time the handout asks for).
  void PrintRunBanner(int64_t total, int64_t updates_per_epoch, int64_t epochs) const;
  void PrintMeanIterationTime() const;
  // The end of update `update` (1-based), after its micro-batches' backward passes: the stage's
  // synchronisation, --fp16's unscaling (an overflow skips the step), the stage's optimizer
  // step, the loss averaged over ranks, the log line.
  struct Stepped {
    double lr = 0, grad_norm = 0, loss_mean = 0, step_ms = 0;
  };
  Stepped FinishUpdate(UpdateContext& u, int64_t update, int64_t epoch, double loss_sum, int64_t global_samples,
                       std::chrono::steady_clock::time_point start);
  void PrepareOutputDir();
  void LogUpdate(int64_t step, int64_t epoch, double loss, double lr, double grad_norm, double step_ms,
                 int64_t samples, std::optional<double> loss_scale, bool skipped);
  double AverageOverRanks(double value);
  void MaybeInjectFault(int64_t update) const;
  // --fp16: unscales the gradients; false (gradients dropped) when they overflowed.
  bool UnscaleGradients(int64_t update);
  // Sets every gradient to none, and has the optimizer zero what it keeps of them (a sharded
  // one's shards): an overflowed update, an epoch's incomplete accumulation.
  void DropGradients();
  // Snapshots (see snapshot.h): what a resume must agree on, the tensors saved, writing one,
  // and resuming from the newest valid one (rank 0 reads, every rank receives).
  nlohmann::json Fingerprint() const;
  // The tensors of a snapshot: parameters, `state`'s moments (shared, not copied), the RNG.
  NamedTensors SnapshotTensors(const OptimizerState& state) const;
  // A whole snapshot through the stage's WithFullParameters; a sharded one (the optimizer has
  // a ShardLayout: task 6) in parts, each rank its own.
  void Snapshot(const TrainingState& state);
  TrainingState StateToSave(const TrainingState& state) const;
  void SnapshotWhole(const TrainingState& state);
  void SnapshotParts(const TrainingState& state, const nlohmann::json& layout);
  // Parameters, moments and generator from the snapshot `state` describes (`snap`: rank 0's,
  // null elsewhere), `step` updates done; false, on every rank, when a rank's part of a sharded
  // snapshot is unusable (the caller tries the one before).
  bool RestoreSnapshot(const TrainingState& state, LoadedSnapshot* snap, int64_t step);
  std::optional<TrainingState> TryResume(LinearSchedule& schedule);
  // What training_args.json and TensorBoard's "args" text hold: the options, stage, ranks.
  nlohmann::json RunArgs() const;
  // --report_to=tensorboard (trainer_report.cc): the main rank's event file in --logging_dir
  // (default OUTPUT_DIR/runs/<stage and settings>), which starts with RunArgs as a table; then
  // every number of `fields` (but "step") as a scalar named prefix + key.
  void StartTensorBoard();
  void AddScalars(const std::string& prefix, int64_t step, const nlohmann::json& fields);

  nlohmann::json memory_;            // this update's held_* and mem_* fields (FinishUpdate)
  nlohmann::json last_memory_;       // the last log line's held_* and mem_peak_bytes, for the end
  TrainOptions options_;
  Stage& stage_;
  DistInfo dist_;
  torch::Device device_{torch::kCPU};
  std::unique_ptr<ModelTask> task_;
  std::vector<torch::Tensor> parameters_;
  NamedParameters named_parameters_;
  std::unique_ptr<StageContext> ctx_;     // what the stage's hooks see (made by Setup)
  std::unique_ptr<Optimizer> optimizer_;  // the stage's (made by Train)
  std::unique_ptr<tensorboard::EventWriter> tensorboard_;  // --report_to=tensorboard, main rank
  std::unique_ptr<trace::Recorder> trace_;                 // --trace
  bool trace_written_ = false;
  std::vector<double> losses_;
  std::vector<double> step_ms_;
  std::vector<EvalResult> eval_results_;
  double last_epoch_time_s_ = 0;
  double last_epoch_samples_per_s_ = 0;
  bool terminal_ = false;             // stdout is a terminal: progress lines redrawn in place
  // Training's progress line, while Train() runs (evaluation ends its line).
  class ProgressLine* progress_ = nullptr;
  Precision precision_ = Precision::kFp32;  // --bf16 / --fp16 (set by Setup)
  LossScaler scaler_{false};                // --fp16's; the identity otherwise
  bool setup_done_ = false;
};

}  // namespace distlm::train
