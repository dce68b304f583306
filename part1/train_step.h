// Part 1: the three pieces of the training loop a student writes.
//
// The shared Trainer (common/train/trainer.h) runs the epochs, batches, forward pass, logging
// and evaluation; it calls these at the right moments (common/train/stage.h says when). reference/ and student/ both implement
// this header; one main.cc links either.
#pragma once

#include <torch/types.h>

#include "common/train/stage.h"

namespace distlm::part1 {

// Called once per mini-batch with its loss (already divided by --gradient_accumulation_steps):
// compute the gradients of the loss with respect to every parameter.
void Backward(const torch::Tensor& loss);

// Called once per optimizer update, after the gradients of all its mini-batches are in .grad.
// When it returns, the optimizer has taken one step, on the gradients clipped to a global norm
// of at most u.max_grad_norm (so that a rare huge gradient cannot throw the model far), at the
// schedule's learning rate for this update; the optimizer holds the next update's rate; and
// .grad is clear, since backward adds into it. Returns the gradient norm measured before
// clipping (the log's grad_norm: how large the gradients really were).
double OptimizerStep(train::UpdateContext& u);

// Called at the end of every epoch (1-based): evaluate on the dev split when --do_eval is set.
// `run` is what the stage may see of the run: its options, and an evaluation to ask for.
void EndOfEpoch(const train::StageContext& run, int64_t epoch);

// These three, for a stage: every stage trains with part 1's step (tasks 2a, 2b, 3 and 5 build
// on yours; task 5 replaces the optimizer step with its sharded update).
inline train::TrainStep MakeTrainStep() { return {Backward, OptimizerStep, EndOfEpoch}; }

}  // namespace distlm::part1
