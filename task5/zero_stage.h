// Task 5's stage: the Trainer around the student's sharded update (ZeRO stage 2). Given code,
// not the student's.
//
// Its optimizer (MakeOptimizer) is a zero::ShardedAdamW over the model, which makes the
// parameters and their gradients views of its flat buffers; rank 0 prints the layout and the
// bytes each rank keeps. Each update calls the student's ShardedStepFn (reduce-scatter, clip and
// step the shard, all-gather), then the schedule, then zeroes the flat gradient. Snapshots
// gather the moment shards on rank 0, so it writes the whole state in the format of every
// other stage, and a resume gives each rank its slices. Under --fp16 the ranks vote on an
// overflow: their gradients differ until the step averages them.
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
#include "common/zero/sharded_adamw.h"

namespace distlm::task5 {

// The student's part: one update on this rank; returns the gradient norm before clipping.
using ShardedStepFn = std::function<double(c10d::ProcessGroup& pg, zero::ShardedAdamW& opt, double max_grad_norm)>;

class ZeroStage : public train::Stage {
 public:
  // `sharded_step` replaces part 1's optimizer step; `step` gives part 1's backward and end of
  // epoch.
  ZeroStage(std::string name, train::TrainStep step, ShardedStepFn sharded_step);
  ~ZeroStage() override;

  train::DistInfo Connect() override;  // float32 only: --comm_dtype refused
  std::unique_ptr<train::Optimizer> MakeOptimizer(const train::StageContext& ctx) override;
  void BeforeTraining(const train::StageContext& ctx) override;
  double OptimizerStep(const train::StageContext& ctx, train::UpdateContext& u) override;
  train::UpdateFigures TakeFigures() override { return std::exchange(figures_, {}); }

 private:
  ShardedStepFn sharded_step_;
  std::unique_ptr<zero::ShardedAdamW> opt_;  // made by MakeOptimizer; the stage outlives the run
  train::UpdateFigures figures_;
};

// Task 5's stage (`name`: task5, or the grader's mutants) with part 1's backward and end of
// epoch and the given sharded update.
std::unique_ptr<train::Stage> MakeZeroStage(std::string name, train::TrainStep step, ShardedStepFn sharded_step);

}  // namespace distlm::task5
