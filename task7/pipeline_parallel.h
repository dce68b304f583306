// Task 7b, pipeline parallelism: the loop that runs one stage's steps (pipeline_schedule.h) and
// moves the tensors between the stages.
//
// P ranks hold P contiguous blocks of the model, rank s the block of stage s. The forward of
// micro-batch m on stage s consumes what stage s - 1's forward of m produced (the last stage
// produces m's loss); its backward consumes the gradient of that output from stage s + 1 and
// produces the gradient of its input for stage s - 1. Messages travel by point-to-point send
// and recv on the pipeline's group (c10d's ProcessGroup::send / recv), each a tensor of
// activation_shape; a micro-batch's messages carry its number as their tag, so that one cannot
// be taken for another's.
#pragma once

#include <functional>
#include <vector>

#include <torch/types.h>

#include "common/dist/c10d_compat.h"
#include "task7/pipeline_schedule.h"

namespace distlm::task7 {

// One stage of the pipeline, as the loop sees it (given code fills it: pipeline_stage.h).
struct PipelineStage {
  int stage = 0;           // s: this rank in pg
  int stages = 1;          // P: pg's size
  int micro_batches = 1;   // M
  dist::GroupPtr pg;
  // The shape (and dtype) of every tensor that travels between two stages, per micro-batch:
  // the activations forward, their gradients backward.
  std::vector<int64_t> activation_shape;
  torch::ScalarType dtype = torch::kFloat;
  // This stage's block on micro-batch m. `input` is what stage s - 1 sent (undefined on stage 0,
  // which reads its micro-batch itself). Returns the output to send on, or on the last stage
  // the micro-batch's loss (already divided by M, so that the gradients add up to the batch's).
  std::function<torch::Tensor(int m, const torch::Tensor& input)> forward;
  // Backward of micro-batch m through this block: from `output` (what forward returned) with
  // the gradient `grad_output` (undefined on the last stage: the output is the loss). Leaves
  // the block's parameter gradients accumulated, and input.grad() set where the input needs it.
  std::function<void(int m, const torch::Tensor& output, const torch::Tensor& grad_output)> backward;
};

// Runs `steps` (this stage's, in order) on `stage`, every step exactly once, so that when all
// stages return, the last stage's losses and every stage's parameter gradients are those of
// the whole model on the whole batch. What must hold, and why:
//   - each stage runs its steps in the order given: the schedule decides what is held, and two
//     stages that disagree on the order of their messages wait for each other forever;
//   - a stage's input received from s - 1 requires its gradient, or the gradient stage s - 1
//     needs for its backward never exists;
//   - a micro-batch's tensors are released once its backward has run: what a stage holds
//     between its steps is the schedule's memory, which is the point of 1F1B;
//   - every send is complete (its Work waited for) before this returns, and a tensor being sent
//     does not change before then: an unfinished send may still be reading it.
// Returns the sum of the last stage's losses (0 on the other stages).
double RunPipelineSteps(const PipelineStage& stage, const std::vector<PipelineStep>& steps);

}  // namespace distlm::task7
