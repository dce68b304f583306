#include "task8/local_sgd_stage.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "common/runtime/elapsed.h"
#include "common/runtime/errors.h"
#include "common/train/distributed.h"

ABSL_FLAG(int64_t, inner_steps, 10, "task8: the updates each worker takes alone between two outer steps (H)");
ABSL_FLAG(double, outer_lr, 0.7, "task8: the outer optimizer's learning rate (1 with no momentum: local SGD)");
ABSL_FLAG(double, outer_momentum, 0.9, "task8: the outer optimizer's momentum (0: plain SGD)");
ABSL_FLAG(bool, outer_nesterov, true, "task8: Nesterov momentum for the outer optimizer (DiLoCo's)");
ABSL_FLAG(std::string, compression, "none", "task8: how the pseudo-gradient travels: none (float32) or int8 (8b)");

namespace distlm::task8 {

OuterOptimizerOptions OuterOptionsFromFlags() {
  OuterOptimizerOptions o;
  o.lr = absl::GetFlag(FLAGS_outer_lr);
  o.momentum = absl::GetFlag(FLAGS_outer_momentum);
  o.nesterov = absl::GetFlag(FLAGS_outer_nesterov);
  auto text = [](double v) {
    char s[32];
    std::snprintf(s, sizeof(s), "%g", v);
    return std::string(s);
  };
  if (!std::isfinite(o.lr) || o.lr <= 0) throw UserError("--outer_lr=" + text(o.lr) + ": must be > 0");
  if (!std::isfinite(o.momentum) || o.momentum < 0 || o.momentum >= 1) {
    throw UserError("--outer_momentum=" + text(o.momentum) + ": must be in [0, 1)");
  }
  if (o.nesterov && o.momentum == 0) {
    throw UserError("--outer_nesterov needs --outer_momentum > 0 (Nesterov without momentum is plain SGD; "
                    "pass --outer_nesterov=false)");
  }
  return o;
}

int64_t InnerStepsFromFlags() {
  const int64_t h = absl::GetFlag(FLAGS_inner_steps);
  if (h < 1) throw UserError("--inner_steps=" + std::to_string(h) + ": a round needs at least one update (H >= 1)");
  return h;
}

Compression CompressionFromFlags() {
  const std::string c = absl::GetFlag(FLAGS_compression);
  for (Compression known : {Compression::kNone, Compression::kInt8}) {
    if (c == CompressionName(known)) return known;
  }
  throw UserError("--compression=" + c + ": not one of none, int8");
}

namespace {

// BertAdamW, each worker its own. Snapshots are written as every stage's (at an epoch's end the
// round has just ended, so the parameters are every worker's), but they hold rank 0's moments
// and no outer state: resuming from one would not continue this run, so it is refused.
class WorkerAdamW : public train::ForwardingOptimizer {
 public:
  using ForwardingOptimizer::ForwardingOptimizer;
  void LoadState(const train::OptimizerState&) override {
    throw UserError("task8 does not resume from a snapshot (it holds neither every worker's AdamW moments nor the "
                    "outer optimizer's state); pass --overwrite_output_dir or another --output_dir");
  }
};

class LocalSgdStage : public train::Stage {
 public:
  LocalSgdStage(train::TrainStep step, OuterLoopFactory make)
      : Stage("task8", std::move(step)), make_(std::move(make)) {}

  train::DistInfo Connect() override {
    inner_steps_ = InnerStepsFromFlags();
    outer_options_ = OuterOptionsFromFlags();
    compression_ = CompressionFromFlags();
    train::DistInfo dist = train::InitDistributedFloat32Only(name(), "the pseudo-gradient");
    if (dist.world_size < 2 || !dist.pg) {
      throw UserError("task8 trains 2 or more workers (--world_size, or tools/launch --nproc_per_node); "
                      "one worker alone is part 1");
    }
    return dist;
  }

  std::unique_ptr<train::Optimizer> MakeOptimizer(const train::StageContext& ctx) override {
    if (ctx.options().save_steps > 0) {
      throw UserError("--save_steps=" + std::to_string(ctx.options().save_steps) +
                      ": task8 snapshots only at epoch ends, where a round ends");
    }
    return std::make_unique<WorkerAdamW>(Stage::MakeOptimizer(ctx));
  }

  void BeforeTraining(const train::StageContext& ctx) override {
    outer_ = make_(outer_options_, compression_);
    if (!outer_) throw std::logic_error("task8: MakeOuterLoop returned nothing");
    outer_->Begin(ctx.parameters());
    train::CountingGroup(ctx.dist()).TakeStats();  // the set-up's
    if (ctx.is_main_rank()) {
      std::printf("task8: %d worker(s), rounds of %lld update(s); outer SGD lr %g, momentum %g%s; exchange: %s\n",
                  ctx.dist().world_size, static_cast<long long>(inner_steps_), outer_options_.lr,
                  outer_options_.momentum, outer_options_.nesterov ? ", Nesterov" : "",
                  compression_ == Compression::kInt8 ? "int8 with error feedback" : "float32");
    }
  }

  double OptimizerStep(const train::StageContext& ctx, train::UpdateContext& u) override {
    const double norm = Stage::OptimizerStep(ctx, u);
    ++round_updates_;
    figures_ = {};
    if (round_updates_ == inner_steps_ || u.ends_epoch) {
      const auto start = std::chrono::steady_clock::now();
      outer_->End(*ctx.dist().pg, ctx.parameters());
      figures_.comm_time_ms = MsSince(start);
      figures_.fields["round"] = ++rounds_;
      figures_.fields["round_updates"] = round_updates_;
      figures_.fields["compression"] = CompressionName(compression_);
      round_updates_ = 0;
    }
    // Between rounds this is what went through the group since the last update: nothing, when
    // the stage is right.
    figures_.comm = train::CountingGroup(ctx.dist()).TakeStats();
    return norm;
  }

  train::UpdateFigures TakeFigures() override { return std::exchange(figures_, {}); }
  bool averages_loss_over_ranks() const override { return false; }

 private:
  OuterLoopFactory make_;
  int64_t inner_steps_ = 1;
  OuterOptimizerOptions outer_options_;
  Compression compression_ = Compression::kNone;
  std::unique_ptr<OuterLoop> outer_;
  int64_t round_updates_ = 0, rounds_ = 0;
  train::UpdateFigures figures_;
};

}  // namespace

std::unique_ptr<train::Stage> MakeLocalSgdStage(train::TrainStep step, OuterLoopFactory make_outer_loop) {
  return std::make_unique<LocalSgdStage>(std::move(step), std::move(make_outer_loop));
}

}  // namespace distlm::task8
