// Task 6's stage: the Trainer around the student's fully sharded data parallel (ZeRO stage 3).
// Given code, not the student's.
//
// MakeOptimizer cuts the model into its units (ctx.units()) and shards each (FsdpModel: after
// it, no rank holds the whole model); BeforeTraining sets the unit hooks (FsdpSchedule), so
// every forward and backward gathers, frees and reduce-scatters unit by unit through the
// student's functions. Each update: the student's ShardedStep, the schedule, the shards'
// gradients zeroed. Gradient accumulation reduce-scatters every micro-batch into the shards
// (FSDP's default): the full gradients never outlive their unit's backward, at the price of
// one reduce-scatter per micro-batch (no_sync would keep whole gradients between micro-batches,
// the memory task 6 exists to save). Evaluation and saving see the whole model through
// WithFullParameters. Snapshots are sharded: each rank writes its blocks of the parameters and
// moments, rank 0 an index with the layout (common/train/snapshot.h); a run of the same layout
// reads its own part back, any other (another world size, another stage) rebuilds the whole
// tensors from the parts and takes its own.
//
// Per update the log line carries, besides the standard fields:
//   comm_time_ms, comm_calls, comm_tensors, comm_bytes, comm_dtype, comm_ops, comm_shapes
//   units                 the number of units
//   held_param_bytes, held_grad_bytes   what this rank holds of them, from the storages: its
//                         shards (the Trainer's own count would see the empty full buffers);
//                         with the Trainer's held_opt_bytes, held_model_state_bytes is ZeRO's
//                         16/N bytes per parameter, plus padding
//   full_bytes_peak       the most bytes of full parameters and gradients held at once
//   shard_numel, padding  summed over units; reduce_scatter ("native" or "allreduce+slice")
//   fsdp                  --fsdp: blocking (6a), prefetch (6b), overlap (6c)
//   comm_busy_ms          time some collective was in flight (launch to completion)
//   comm_exposed_ms       of the update, the time the rank was blocked on one (= comm_time_ms)
//   comm_hidden_ms        busy minus exposed: communication the rank computed through
//   gathers, gathers_prefetched, reduce_scatters   counts in the update (gathers: both passes)
//   gathers_still_running, reduce_scatters_still_running   prefetched gathers (6b) and
//                         reduce-scatters (6c) still running when the student's StartGather /
//                         StartReduceScatter returned (0 over a run: each waited inside)
#pragma once

#include <memory>
#include <string>

#include "common/train/stage.h"
#include "task6/fsdp_schedule.h"
#include "task6/fsdp_unit.h"

namespace distlm::task6 {

class FsdpStage : public train::Stage {
 public:
  FsdpStage(std::string name, train::TrainStep step);
  ~FsdpStage() override;

  train::DistInfo Connect() override;  // float32 on the wire: --comm_dtype refused
  std::unique_ptr<train::Optimizer> MakeOptimizer(const train::StageContext& ctx) override;
  void BeforeTraining(const train::StageContext& ctx) override;
  void SyncGradients(const train::StageContext& ctx) override;
  double OptimizerStep(const train::StageContext& ctx, train::UpdateContext& u) override;
  train::UpdateFigures TakeFigures() override { return std::exchange(figures_, {}); }
  void WithFullParameters(const train::StageContext& ctx, const std::function<void()>& use) override;

 private:
  std::unique_ptr<FsdpModel> model_;        // made by MakeOptimizer
  std::unique_ptr<FsdpSchedule> schedule_;  // the hooks, from MakeOptimizer on
  Overlap overlap_ = Overlap::kFull;        // --fsdp
  train::UpdateFigures figures_;
};

std::unique_ptr<train::Stage> MakeFsdpStage(std::string name, train::TrainStep step);

}  // namespace distlm::task6
