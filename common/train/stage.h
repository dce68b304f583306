// A stage of the course as the Trainer sees it: one object the loop calls at named points.
//
// One update, in order (the data flows one way: the Trainer hands each call what it needs and
// takes back what it returns; stages never reach into each other):
//
//   once:            BeforeTraining(trainer)            after setup and any resume
//   per micro-batch: BeforeBackward(trainer, will_sync) will_sync: the update's last micro-batch
//                    Backward(loss)                     part 1's
//   per update:      SyncGradients(trainer)             tasks 2a/2b/3: .grad = the mean over ranks
//                    OptimizerStep(update) -> norm      part 1's (task 5: its sharded update)
//                    TakeFigures() -> UpdateFigures     typed; the Trainer writes the log line
//   per epoch:       EndOfEpoch(trainer, epoch)         part 1's
//
// Part 1's three pieces arrive as a TrainStep (part1_single/train_step.h): every stage trains
// with the student's own part 1, or the reference's. Part 1 itself is this base class as it is.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "common/dist/counting_process_group.h"
#include "common/train/bert_adamw.h"
#include "common/train/schedule.h"

namespace distlm::train {

class Trainer;

// What an optimizer step works on.
struct UpdateContext {
  BertAdamW& optimizer;
  LinearSchedule& schedule;
  const std::vector<torch::Tensor>& parameters;
  double max_grad_norm;
};

// Part 1's pieces (part1_single/train_step.h).
struct TrainStep {
  // The backward pass of the (already accumulation-scaled) loss.
  std::function<void(const torch::Tensor& loss)> backward;
  // Clip, optimizer step, schedule step, zero gradients; the norm before clipping.
  std::function<double(UpdateContext&)> optimizer_step;
  // The end of an epoch (1-based): evaluation when --do_eval.
  std::function<void(Trainer&, int64_t epoch)> end_of_epoch;
};

// Task 3: when the update's all-reduces ran, against its backward (task3/ddp_stage.h).
struct OverlapFigures {
  double busy_ms = 0;      // some all-reduce in flight
  double hidden_ms = 0;    // of which before backward ended
  double backward_ms = 0;  // the synchronised backward, start to end
  int64_t buckets = 0;     // all-reduces launched
  int64_t started_before_backward_end = 0;
  int64_t no_sync_calls = 0;  // collectives during the no_sync backward passes
};

// Task 5: what each rank keeps (common/zero/zero_stage.h).
struct ShardFigures {
  int64_t opt_state_bytes = 0;                 // rank 0's AdamW moments
  std::vector<int64_t> opt_state_bytes_per_rank;
  int64_t grad_bytes = 0;                      // rank 0's gradient shard
  int64_t grad_buffer_bytes = 0;               // the whole flat gradient
  int64_t shard_numel = 0, padding = 0;
  std::string reduce_scatter;                  // "native" or "allreduce+slice"
};

// A stage's figures for one update; the Trainer adds them to the update's log line.
struct UpdateFigures {
  std::optional<dist::CommStats> comm;  // the collectives of the synchronisation
  double comm_time_ms = 0;              // the time it blocked the step (with comm)
  std::optional<OverlapFigures> overlap;
  std::optional<ShardFigures> shard;
  // The log line's fields (docs/handout/part2.md and part3.md list them).
  nlohmann::json ToJson() const;
};

class Stage {
 public:
  // `name` names outputs and messages (common/stages/stages.h's ids, part 1: part1_single).
  // A step without all three pieces is a logic error.
  Stage(std::string name, TrainStep step);
  virtual ~Stage();
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  const std::string& name() const { return name_; }

  virtual void BeforeTraining(Trainer&) {}
  virtual void BeforeBackward(Trainer&, bool /*will_sync*/) {}
  void Backward(const torch::Tensor& loss) { step_.backward(loss); }
  virtual void SyncGradients(Trainer&) {}
  virtual double OptimizerStep(UpdateContext& u) { return step_.optimizer_step(u); }
  // The figures of the update just stepped (then forgotten).
  virtual UpdateFigures TakeFigures() { return {}; }
  void EndOfEpoch(Trainer& t, int64_t epoch) { step_.end_of_epoch(t, epoch); }

  // Task 5 keeps the optimizer state itself, sharded over ranks: the Trainer's BertAdamW then
  // holds no parameters (only the learning rate), and snapshots keep their format through
  // these two. GatherOptimizerState: each parameter's whole exp_avg/exp_avg_sq, in
  // registration order: the values on rank 0, tensors of the same shapes elsewhere (a
  // collective: every rank calls it at each snapshot and resume). LoadOptimizerState: the
  // resumed state (its step = updates done).
  virtual bool shards_optimizer_state() const { return false; }
  virtual BertAdamW::State GatherOptimizerState(Trainer&);
  virtual void LoadOptimizerState(Trainer&, const BertAdamW::State&);

  // For grading's mutation tests only: every rank reads the whole data set in the same order
  // (as if the distributed sampler were forgotten).
  virtual bool every_rank_reads_all_data() const { return false; }

 protected:
  const TrainStep& step() const { return step_; }

 private:
  std::string name_;
  TrainStep step_;
};

}  // namespace distlm::train
