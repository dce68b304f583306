// Part 1 reference solution.
#include "part1/train_step.h"

#include "common/train/bert_adamw.h"

namespace distlm::part1 {

void Backward(const torch::Tensor& loss) { loss.backward(); }

double OptimizerStep(train::UpdateContext& u) {
  // Clip first: the optimizer must see the clipped gradients.
  double grad_norm = train::ClipGradNorm(u.parameters, u.max_grad_norm);
  u.optimizer.Step();
  // The schedule steps after the optimizer, so update k used the rate for k - 1 updates done.
  u.optimizer.set_lr(u.schedule.Step());
  // Gradients accumulate in .grad: clear them before the next update's backward passes.
  u.optimizer.ZeroGrad();
  return grad_norm;
}

void EndOfEpoch(const train::StageContext& run, int64_t epoch) {
  if (run.options().do_eval) run.Evaluate(epoch);
}

}  // namespace distlm::part1
