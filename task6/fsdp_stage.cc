#include "task6/fsdp_stage.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/flags/flag.h"
#include "common/dist/counting_process_group.h"
#include "common/runtime/elapsed.h"
#include "common/runtime/errors.h"
#include "common/train/distributed.h"
#include "common/zero/sharded_adamw.h"
#include "task6/fsdp.h"

ABSL_FLAG(std::string, fsdp, "overlap",
          "task6: blocking (6a: every collective waited where it is launched), prefetch (6b: each unit's "
          "all-gather launched one unit ahead), overlap (6c: and each reduce-scatter left running behind the "
          "rest of backward)");

namespace distlm::task6 {
namespace {

// The Trainer's view of the shards' AdamW: the rate, the zeroing, the snapshots. The update is
// the student's ShardedStep, which FsdpStage::OptimizerStep calls.
class FsdpOptimizer : public train::Optimizer {
 public:
  FsdpOptimizer(FsdpModel& model, c10d::ProcessGroup& pg) : model_(model), pg_(pg) {}
  void Step() override { throw std::logic_error("task 6's update is ShardedStep (its stage calls it)"); }
  void ZeroGrad() override { model_.ZeroGradShards(); }
  double lr() const override { return model_.adam().lr(); }
  void set_lr(double lr) override { model_.adam().set_lr(lr); }
  int64_t step_count() const override { return model_.adam().step_count(); }
  train::OptimizerState GatherState() override { return model_.GatherState(pg_); }
  int64_t StateBytes() const override { return model_.OptimizerStateBytes(); }
  // --fp16: each rank checks its own shards of the (scaled) averaged gradient, and they vote.
  std::vector<torch::Tensor> GradientsToUnscale() override {
    std::vector<torch::Tensor> shards;
    for (int u = 0; u < model_.num_units(); ++u) shards.push_back(model_.unit(u).grad_shard());
    return shards;
  }
  c10d::ProcessGroup* overflow_vote_group() const override { return model_.world_size() > 1 ? &pg_ : nullptr; }
  void LoadState(const train::OptimizerState& state) override { model_.LoadState(state); }
  // Snapshots in parts: each rank writes its shards, no rank gathers (common/train/snapshot.h).
  nlohmann::json ShardLayout() const override { return model_.ShardLayout(); }
  NamedTensors SaveShards() const override { return model_.SaveShards(); }
  void LoadShards(const NamedTensors& part, int64_t step) override { model_.LoadShards(part, step); }

 private:
  FsdpModel& model_;
  c10d::ProcessGroup& pg_;
};

nlohmann::json MemoryFields(const FsdpModel& m, int64_t peak_full_bytes, bool native) {
  int64_t shard = 0, padding = 0;
  for (int u = 0; u < m.num_units(); ++u) {
    shard += m.unit(u).shard_numel();
    padding += m.unit(u).layout().padding();
  }
  // The parameters' storages the Trainer sees are the units' full buffers, empty between uses:
  // what the rank holds are its shards.
  return {{"units", m.num_units()},
          {"held_param_bytes", m.ParamBytesHeld()},
          {"held_grad_bytes", m.GradBytesHeld()},
          {"full_bytes_peak", peak_full_bytes},
          {"shard_numel", shard},
          {"padding", padding},
          {"reduce_scatter", native ? "native" : "allreduce+slice"}};
}

}  // namespace

FsdpStage::FsdpStage(std::string name, train::TrainStep step) : Stage(std::move(name), std::move(step)) {}

FsdpStage::~FsdpStage() = default;

train::DistInfo FsdpStage::Connect() {
  overlap_ = ParseOverlap(absl::GetFlag(FLAGS_fsdp));  // before any rank connects: a bad flag is one line
  return train::InitDistributedFloat32Only(name(), "its all-gathers and reduce-scatters send float32");
}

std::unique_ptr<train::Optimizer> FsdpStage::MakeOptimizer(const train::StageContext& ctx) {
  if (!ctx.dist().pg) throw UserError(name() + " needs a process group");
  if (ctx.units().empty()) throw UserError(name() + ": the model has no units to shard");
  model_ = std::make_unique<FsdpModel>(ctx.units(), ctx.named_parameters(), train::AdamWOptionsFor(ctx.options()),
                                       ctx.dist().rank, ctx.dist().world_size);
  schedule_ = std::make_unique<FsdpSchedule>(*ctx.dist().pg, *model_, overlap_);
  return std::make_unique<FsdpOptimizer>(*model_, *ctx.dist().pg);
}

void FsdpStage::BeforeTraining(const train::StageContext& ctx) {
  if (!schedule_) throw UserError(name() + ": the shards were not built");
  ctx.SetUnitHooks(schedule_->hooks());
  schedule_->TakeFigures();
  train::CountingGroup(ctx.dist()).TakeStats();  // set-up's and the resume's collectives
  if (!ctx.is_main_rank()) return;
  const FsdpModel& m = *model_;
  int64_t largest = 0;
  for (int u = 0; u < m.num_units(); ++u) largest = std::max(largest, m.unit(u).FullBytes());
  // While units run (fsdp_schedule.h): the computing unit's parameters and gradient; with
  // prefetch the next unit's parameters too; with overlap the previous unit's gradient too.
  const int whole_params = overlap_ == Overlap::kBlocking ? 1 : 2;
  const int whole_grads = overlap_ == Overlap::kFull ? 2 : 1;
  std::printf("%s: fully sharded over %d rank(s) (%s, --fsdp=%s): %d units, %lld parameters; per rank: parameters %lld bytes, "
              "gradients %lld, AdamW state %lld (unsharded %lld in all), plus, while units run, the full parameters "
              "of up to %d unit(s) and gradients of up to %d (largest unit %lld bytes each)\n",
              name().c_str(), ctx.dist().world_size, ctx.dist().backend.c_str(), OverlapName(overlap_), m.num_units(),
              static_cast<long long>(m.TotalNumel()), static_cast<long long>(m.ParamBytesHeld()),
              static_cast<long long>(m.GradBytesHeld()), static_cast<long long>(m.OptimizerStateBytes()),
              static_cast<long long>(16 * m.TotalNumel()), whole_params, whole_grads, static_cast<long long>(largest));
  const std::string note = zero::FallbackNote(*ctx.dist().pg);
  if (!note.empty()) std::printf("%s: %s\n", name().c_str(), note.c_str());
  std::fflush(stdout);
}

void FsdpStage::SyncGradients(const train::StageContext&) {
  if (schedule_) schedule_->FinishBackward();  // done at backward's end already; a no-op then
}

double FsdpStage::OptimizerStep(const train::StageContext& ctx, train::UpdateContext& u) {
  if (!model_) throw UserError(name() + ": the shards were not built");
  FsdpModel& m = *model_;
  auto& counting = train::CountingGroup(ctx.dist());
  const int64_t steps_before = m.adam().step_count();
  const auto start = std::chrono::steady_clock::now();
  const double norm = ShardedStep(*ctx.dist().pg, m, u.max_grad_norm);
  const double ms = MsSince(start);
  if (m.adam().step_count() != steps_before + 1) {
    throw UserError(name() + ": ShardedStep must call model.StepShards() exactly once per update, it called it " +
                    std::to_string(m.adam().step_count() - steps_before) + " time(s)");
  }
  const FsdpSchedule::Figures f = schedule_->TakeFigures();
  figures_ = {};
  // Everything since the last update: this update's gathers and reduce-scatters, the step's
  // norm, and the previous update's loss average (one scalar).
  figures_.comm = counting.TakeStats();
  const double step_comm_ms = std::max(0.0, ms - m.last_step_ms());
  const double busy_ms = figures_.comm->BusyMs();
  figures_.comm_time_ms = f.wait_ms + step_comm_ms;
  figures_.fields = MemoryFields(m, f.peak_full_bytes, zero::HasReduceScatter(*ctx.dist().pg));
  // Time some collective was in flight, and the part of it the ranks computed through (not
  // blocked on any collective).
  figures_.fields["fsdp"] = OverlapName(overlap_);
  figures_.fields["comm_busy_ms"] = busy_ms;
  figures_.fields["comm_exposed_ms"] = figures_.comm_time_ms;
  figures_.fields["comm_hidden_ms"] = std::max(0.0, busy_ms - figures_.comm_time_ms);
  figures_.fields["gathers"] = f.gathers;
  figures_.fields["gathers_prefetched"] = f.prefetched;
  figures_.fields["reduce_scatters"] = f.reduce_scatters;
  figures_.fields["gathers_still_running"] = f.gathers_running_at_return;
  figures_.fields["reduce_scatters_still_running"] = f.reduce_scatters_running_at_return;
  u.optimizer.set_lr(u.schedule.Step());
  m.ZeroGradShards();
  return norm;
}

void FsdpStage::WithFullParameters(const train::StageContext& ctx, const std::function<void()>& use) {
  if (!schedule_) return use();
  schedule_->WithFullParameters(use);
  // Its gathers belong to no update (evaluation, a snapshot, saving come after the update's line).
  train::CountingGroup(ctx.dist()).TakeStats();
  schedule_->TakeFigures();
}

std::unique_ptr<train::Stage> MakeFsdpStage(std::string name, train::TrainStep step) {
  return std::make_unique<FsdpStage>(std::move(name), std::move(step));
}

}  // namespace distlm::task6
