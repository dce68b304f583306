// Tasks 2a and 2b's stage (and the grader's mutants of them): the student writes the gradient
// synchronisation, a function the Trainer calls after each update's backward passes. Given
// code, not the student's; below both stages, which share it.
//
// Per update its figures are comm_time_ms (compute_time_ms follows) and the communicated
// tensors (count, shapes, dtype, bytes), counted by the process group, not by the student's
// code. --comm_dtype applies to all_reduce only: a stage whose row in common/stages/stages.h
// does not take it (task 2a's gather + scatter) refuses anything but fp32.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include "common/train/stage.h"

namespace distlm::stages {

// A stage's gradient synchronisation: afterwards every parameter's .grad on every rank holds
// the average over ranks of the gradients they computed.
using GradientSyncFn =
    std::function<void(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters)>;

class GradientSyncStage : public train::Stage {
 public:
  GradientSyncStage(std::string name, train::TrainStep step, GradientSyncFn sync);

  train::DistInfo Connect() override;  // --comm_dtype as the stage's row allows, then the ranks
  void BeforeTraining(const train::StageContext& ctx) override;  // records --comm_dtype
  void SyncGradients(const train::StageContext& ctx) override;
  train::UpdateFigures TakeFigures() override;

 private:
  GradientSyncFn sync_;
  at::ScalarType comm_dtype_ = at::kFloat;
  train::UpdateFigures figures_;
};

// The stage of task 2a or 2b (`name`) with part 1's step and the given synchronisation.
std::unique_ptr<train::Stage> MakeGradientSyncStage(std::string name, train::TrainStep step, GradientSyncFn sync);

}  // namespace distlm::stages
