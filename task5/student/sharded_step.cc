// Task 5: your code goes here. Read docs/handout/part5.md first.
#include "task5/sharded_step.h"

#include "common/runtime/errors.h"

namespace distlm::task5 {

double ShardedStep(c10d::ProcessGroup& pg, zero::ShardedAdamW& opt, double max_grad_norm) {
  // TODO(student): 1. reduce-scatter opt.flat_grad() into opt.grad_shard() with
  // zero::ReduceScatterSum and divide the shard by the number of ranks (pg.getSize());
  // 2. clip by the global norm with opt.ClipGradShard(pg, max_grad_norm) (keep what it
  // returns) and call opt.StepShard(); 3. zero::AllGather opt.param_shard() into
  // opt.flat_params(). Return the norm.
  StudentTodo("task5 ShardedStep (reduce-scatter, shard step, all-gather)", "docs/handout/part5.md, section 'Task 5'");
}

}  // namespace distlm::task5
