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
  // TODO(student): what part1/train_step.h says holds when this returns. The tools are
  //   train::ClipGradNorm, u.optimizer (Step, set_lr, ZeroGrad) and u.schedule.Step(); the
  //   handout says what each does. Their order is yours to work out.
  StudentTodo("part1 OptimizerStep", "docs/handout/part1.md, section 'The optimizer step'");
}

void EndOfEpoch(const train::StageContext& run, int64_t epoch) {
  // TODO(student): when run.options().do_eval is set, evaluate (run.Evaluate).
  StudentTodo("part1 EndOfEpoch", "docs/handout/part1.md, section 'Evaluation'");
}

}  // namespace distlm::part1
