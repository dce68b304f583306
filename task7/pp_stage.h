// Task 7b's stage: pipeline parallelism on BERT, driven by the Trainer with part 1's step.
// Given code, not the student's: the student's schedules (pipeline_schedule.h) and loop
// (pipeline_parallel.h) are what runs each batch.
//
// P ranks, stage s = rank s, hold BERT's units cut as task7/pipeline_stage.h cuts them (the
// embeddings and the first layers on stage 0, the head and the loss on stage P - 1). Every rank
// reads every batch (one replica): stage 0 uses its inputs, stage P - 1 its labels. Per batch
// the stage runs its steps of the schedule (--pipeline_schedule, over --micro_batches) through
// the student's RunPipelineSteps, then the last stage's loss is broadcast, so every rank logs the
// batch's loss. Per update:
//   send/recv  each micro-batch's activations forward and their gradients back (B S H x 4 bytes
//              each way per batch for a middle stage)
//   step       the whole model's gradient norm (each stage's squared norms, one all-reduce of P
//              numbers), clipping with it, then part 1's step on this stage's parameters: the
//              optimizer holds this stage's moments only
// A rank holds its own stage's parameters only: the others' are released once the model is cut
// (their tensors stay, empty). Evaluation, snapshots and saving get the whole model for as long
// as they need it (WithFullParameters: storage for the others, one broadcast per stage, released
// again after), and a snapshot's optimizer state is gathered whole, so snapshots are part 1's
// and resume at any P.
//
// Task 7c, data x pipeline: with --pipeline_parallel_size=P below the world size W, W / P
// pipelines of P adjacent ranks (the student's MakeMeshLayout, device_mesh.h: its tensor groups
// are the pipelines), each reading its own share of every batch. Everything above runs in the
// rank's pipeline group; after backward each stage's gradients are averaged over its data group
// (the student's AverageOverDataGroup: the same stage in every pipeline), before the norm.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/dist/counting_process_group.h"
#include "common/train/stage.h"
#include "task7/device_mesh.h"
#include "task7/pipeline_schedule.h"
#include "task7/pipeline_stage.h"

namespace distlm::task7 {

class PipelineParallelStage : public train::Stage {
 public:
  PipelineParallelStage(std::string name, train::TrainStep step);

  // Float32 over Gloo, MPI or NCCL; the flags checked before the rendezvous.
  train::DistInfo Connect() override;
  // Cuts the model (layers fewer than stages, micro-batches not dividing the batch: one line).
  std::unique_ptr<train::Optimizer> MakeOptimizer(const train::StageContext& ctx) override;
  bool runs_forward_backward() const override { return true; }
  double ForwardBackward(const train::StageContext& ctx, const std::vector<int64_t>& indices, int64_t epoch,
                         double loss_divisor) override;
  void SyncGradients(const train::StageContext& ctx) override;
  double OptimizerStep(const train::StageContext& ctx, train::UpdateContext& u) override;
  train::UpdateFigures TakeFigures() override;
  void WithFullParameters(const train::StageContext& ctx, const std::function<void()>& use) override;
  DataShare data_share(const train::DistInfo&) const override { return {mesh_.data_size, mesh_.data_rank}; }

 private:
  int micro_batches_ = 1;
  PipelineSchedule schedule_ = PipelineSchedule::kOneForwardOneBackward;
  UnitRange units_;
  std::vector<PipelineStep> steps_;  // this stage's, from the student's StageSteps
  std::vector<int> owner_;           // per parameter (registration order): the stage that trains it
  std::vector<torch::Tensor> owned_;  // this stage's parameters
  std::vector<std::vector<int64_t>> shapes_;  // every parameter's (the others' are released)
  MeshLayout mesh_;                   // one pipeline (data_size 1) unless --pipeline_parallel_size < world
  dist::GroupPtr pg_;                 // the pipeline's stages: the world's group when there is one pipeline
  dist::GroupPtr data_pg_;            // this stage in every pipeline; null with one pipeline
  std::vector<dist::CountingProcessGroup*> counting_;
  double busy_ms_ = 0, span_ms_ = 0;  // this update's steps, and its batches' pipelines end to end
  int in_flight_peak_ = 0;            // this update's most micro-batches between forward and backward
};

std::unique_ptr<train::Stage> MakePipelineParallelStage(std::string name, train::TrainStep step);

}  // namespace distlm::task7
