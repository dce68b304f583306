// Task 7b, pipeline parallelism: the loop that runs one stage's steps (pipeline_schedule.h) and
// moves the tensors between the stages.
//
// P ranks hold P contiguous blocks of the model, rank s the block of stage s. Forward of
// micro-batch m on stage s takes the activation stage s - 1 sent, runs the block, and sends its
// output to stage s + 1; on the last stage the output is the micro-batch's loss. Backward of m
// on stage s takes the gradient of its output that stage s + 1 sent back (the last stage starts
// from its loss), runs the block's backward, and sends the gradient of its input to stage s - 1.
// A stage keeps each micro-batch's input and output from its forward until its backward: what a
// schedule holds is what it costs in memory.
//
// Messages travel by point-to-point send and recv on the pipeline's group (c10d's
// ProcessGroup::send / recv, tag = the micro-batch), each a tensor of activation_shape.
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

// Runs `steps` (this stage's, in order) on `stage`:
//   forward m   on stage s > 0, receive m's input from s - 1 (a new tensor of activation_shape)
//               and make it require its gradient; out = stage.forward(m, input); on s < P - 1
//               send out to s + 1; keep input and out for backward m.
//   backward m  on s < P - 1, receive the gradient of m's out from s + 1; stage.backward(m, out,
//               that gradient, or an undefined tensor on the last stage); on s > 0 send
//               input.grad() to s - 1; forget m's input and out.
// Every send must be complete (its Work waited for) before this returns, and a tensor being
// sent must not change before then. Returns the sum of the last stage's losses (0 elsewhere).
double RunPipelineSteps(const PipelineStage& stage, const std::vector<PipelineStep>& steps);

}  // namespace distlm::task7
