#include "task5/zero_stage.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "common/dist/counting_process_group.h"
#include "common/runtime/elapsed.h"
#include "common/runtime/errors.h"
#include "common/train/distributed.h"

namespace distlm::task5 {
namespace {

using zero::FlatLayout;
using zero::ShardedAdamW;

// What each rank keeps: the log line's shard fields.
nlohmann::json ShardFields(const ShardedAdamW& opt, bool native_reduce_scatter) {
  const FlatLayout& l = opt.layout();
  std::vector<int64_t> per_rank;
  for (int r = 0; r < l.world_size(); ++r) per_rank.push_back(2 * 4 * l.real_numel(r));
  return {{"opt_state_bytes", opt.OptimizerStateBytes()},
          {"opt_state_bytes_per_rank", per_rank},
          {"grad_bytes", opt.GradShardBytes()},
          {"grad_buffer_bytes", opt.FlatGradBytes()},
          // What the Trainer counts of the gradients is the flat buffer the .grads are views of;
          // the rank also holds its shard.
          {"held_grad_bytes", opt.FlatGradBytes() + opt.GradShardBytes()},
          {"shard_numel", l.shard_numel()},
          {"padding", l.padding()},
          {"reduce_scatter", native_reduce_scatter ? "native" : "allreduce+slice"}};
}

// The Trainer's view of the sharded AdamW: the learning rate, the zeroing, the snapshots (the
// moment shards gathered whole on rank 0) and the fp16 vote. The update itself is the
// student's ShardedStep, which ZeroStage::OptimizerStep calls, so Step is not for calling.
class ShardedOptimizer : public train::Optimizer {
 public:
  ShardedOptimizer(ShardedAdamW& opt, c10d::ProcessGroup& pg) : opt_(opt), pg_(pg) {}
  void Step() override {
    throw std::logic_error("task 5's update is ShardedStep (its stage calls it), not Optimizer::Step");
  }
  void ZeroGrad() override { opt_.ZeroGrad(); }
  double lr() const override { return opt_.lr(); }
  void set_lr(double lr) override { opt_.set_lr(lr); }
  int64_t step_count() const override { return opt_.step_count(); }
  train::OptimizerState GatherState() override { return opt_.GatherState(pg_); }
  void LoadState(const train::OptimizerState& state) override { opt_.LoadState(state); }
  // The ranks' gradients differ until ShardedStep averages them: an overflow is voted on.
  c10d::ProcessGroup* overflow_vote_group() const override { return opt_.world_size() > 1 ? &pg_ : nullptr; }
  int64_t StateBytes() const override { return opt_.OptimizerStateBytes(); }

 private:
  ShardedAdamW& opt_;
  c10d::ProcessGroup& pg_;
};

}  // namespace

ZeroStage::ZeroStage(std::string name, train::TrainStep step, ShardedStepFn sharded_step)
    : Stage(std::move(name), std::move(step)), sharded_step_(std::move(sharded_step)) {}

ZeroStage::~ZeroStage() = default;

train::DistInfo ZeroStage::Connect() {
  // float32 on the wire: the grader's parity is exact sums, and the shards are float32 anyway.
  return train::InitDistributedFloat32Only(name(), "its reduce-scatter and all-gather send float32");
}

std::unique_ptr<train::Optimizer> ZeroStage::MakeOptimizer(const train::StageContext& ctx) {
  if (!ctx.dist().pg) throw UserError(name() + " needs a process group");
  opt_ = std::make_unique<ShardedAdamW>(ctx.named_parameters(), train::AdamWOptionsFor(ctx.options()),
                                        ctx.dist().rank, ctx.dist().world_size);
  return std::make_unique<ShardedOptimizer>(*opt_, *ctx.dist().pg);
}

void ZeroStage::BeforeTraining(const train::StageContext& ctx) {
  if (!opt_) throw UserError(name() + ": the sharded optimizer was not built");
  if (!ctx.is_main_rank()) return;
  const ShardedAdamW& opt = *opt_;
  const FlatLayout& l = opt.layout();
  std::printf("%s: ZeRO stage 2 over %d rank(s) (%s): %s; per rank: AdamW state %lld bytes (unsharded %lld), "
              "gradient shard %lld bytes\n",
              name().c_str(), ctx.dist().world_size, ctx.dist().backend.c_str(), l.Describe().c_str(),
              static_cast<long long>(opt.OptimizerStateBytes()), static_cast<long long>(2 * 4 * l.total_numel()),
              static_cast<long long>(opt.GradShardBytes()));
  const std::string note = zero::FallbackNote(*ctx.dist().pg);
  if (!note.empty()) std::printf("%s: %s\n", name().c_str(), note.c_str());
  std::fflush(stdout);
}

double ZeroStage::OptimizerStep(const train::StageContext& ctx, train::UpdateContext& u) {
  if (!opt_) throw UserError(name() + ": the sharded optimizer was not built");
  ShardedAdamW& opt = *opt_;
  auto& counting = train::CountingGroup(ctx.dist());
  counting.TakeStats();  // drop what came before (loss averaging, evaluation)
  const int64_t steps_before = opt.step_count();
  // The trainer drops gradients (sets them to none) after an epoch's incomplete accumulation
  // group; the backward after that made new ones outside the flat buffer.
  opt.AdoptGradients();
  auto start = std::chrono::steady_clock::now();
  const double norm = sharded_step_(*ctx.dist().pg, opt, u.max_grad_norm);
  const double ms = MsSince(start);
  if (opt.step_count() != steps_before + 1) {
    throw UserError(name() + ": ShardedStep must call opt.StepShard() exactly once per update, it called it " +
                    std::to_string(opt.step_count() - steps_before) + " time(s)");
  }
  figures_ = {};
  figures_.comm = counting.TakeStats();
  figures_.comm_time_ms = std::max(0.0, ms - opt.last_step_ms());
  figures_.fields = ShardFields(opt, zero::HasReduceScatter(*ctx.dist().pg));
  u.optimizer.set_lr(u.schedule.Step());  // u.optimizer is this stage's: the rate goes to opt
  opt.ZeroGrad();
  return norm;
}

std::unique_ptr<train::Stage> MakeZeroStage(std::string name, train::TrainStep step, ShardedStepFn sharded_step) {
  return std::make_unique<ZeroStage>(std::move(name), std::move(step), std::move(sharded_step));
}

}  // namespace distlm::task5
