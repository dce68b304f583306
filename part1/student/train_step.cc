// Part 1: your code goes here. Read docs/handout/part1.md first.
#include "part1/train_step.h"

#include "common/runtime/errors.h"
#include "common/train/bert_adamw.h"

namespace distlm::part1 {

void Backward(const torch::Tensor& loss) {
  // TODO(student): compute the gradients of `loss` (one line).
  StudentTodo("part1 Backward", "docs/handout/part1.md, section 'The backward pass'");
}

double OptimizerStep(train::UpdateContext& u) {
  // TODO(student): in this order:
  //   1. clip the gradients of u.parameters to u.max_grad_norm (train::ClipGradNorm returns
  //      the norm before clipping: return it at the end);
  //   2. take the optimizer step (u.optimizer);
  //   3. advance the schedule and give the optimizer its new learning rate (u.schedule.Step()
  //      returns it; u.optimizer.set_lr sets it);
  //   4. clear the gradients for the next update.
  StudentTodo("part1 OptimizerStep", "docs/handout/part1.md, section 'The optimizer step'");
}

void EndOfEpoch(const train::StageContext& run, int64_t epoch) {
  // TODO(student): when run.options().do_eval is set, evaluate (run.Evaluate).
  StudentTodo("part1 EndOfEpoch", "docs/handout/part1.md, section 'Evaluation'");
}

}  // namespace distlm::part1
