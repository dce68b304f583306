// Running a stage whose student writes the sharded optimizer update (task 5, ZeRO stage 2).
//
// The stage: on first use (a resume or before training) a ShardedAdamW is built over the model,
// which makes the parameters and their gradients views of its flat buffers, and rank 0 prints
// the layout and the bytes each rank keeps. The trainer's own BertAdamW then holds no state
// (shards_optimizer_state). Each update calls the student's
// ShardedStepFn (reduce-scatter, clip and step the shard, all-gather), then the schedule, then
// zeroes the flat gradient. Snapshots gather the moment shards on rank 0, so it writes the
// whole state in the format of every other stage, and a resume gives each rank its slices.
//
// Per update the log line carries, besides the standard fields:
//   comm_time_ms         the update's time outside StepShard (the collectives, and the small
//                        clipping arithmetic), so compute_time_ms = step - comm_time_ms
//   comm_calls, comm_tensors, comm_bytes, comm_dtype, comm_ops, comm_shapes (as 2a/2b)
//   opt_state_bytes      rank 0's AdamW moments (2 x 4 bytes x its shard's real elements)
//   opt_state_bytes_per_rank  the same for every rank, from the layout
//   grad_bytes           rank 0's gradient shard (4 x S)
//   grad_buffer_bytes    the whole flat gradient backward writes into (4 x N x S)
//   shard_numel, padding, reduce_scatter ("native" or "allreduce+slice")
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/train/stage.h"
#include "common/train/trainer.h"
#include "common/zero/sharded_adamw.h"

namespace distlm::zero {

// The student's part: one update on this rank; returns the gradient norm before clipping.
using ShardedStepFn = std::function<double(c10d::ProcessGroup& pg, ShardedAdamW& opt, double max_grad_norm)>;

class ZeroStage : public train::Stage {
 public:
  // `sharded_step` replaces part 1's optimizer step; `step` gives part 1's backward and end of
  // epoch.
  ZeroStage(std::string name, train::TrainStep step, ShardedStepFn sharded_step);
  ~ZeroStage() override;

  void BeforeTraining(train::Trainer& t) override;
  double OptimizerStep(train::UpdateContext& u) override;
  train::UpdateFigures TakeFigures() override { return std::exchange(figures_, {}); }
  bool shards_optimizer_state() const override { return true; }
  train::BertAdamW::State GatherOptimizerState(train::Trainer& t) override;
  void LoadOptimizerState(train::Trainer& t, const train::BertAdamW::State& state) override;

 private:
  // Builds the sharded optimizer the first time it is needed: at a resume or before training.
  ShardedAdamW& Ensure(train::Trainer& t);

  ShardedStepFn sharded_step_;
  std::unique_ptr<ShardedAdamW> opt_;
  train::Trainer* trainer_ = nullptr;
  train::UpdateFigures figures_;
};

// main() of task 5. Flags as tasks 2a/2b (--comm_dtype refused: float32 only).
int RunZeroStage(int argc, char** argv, ZeroStage& stage);

}  // namespace distlm::zero
