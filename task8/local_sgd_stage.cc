#include "task8/local_sgd_stage.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_join.h"
#include "common/runtime/elapsed.h"
#include "common/runtime/errors.h"
#include "common/dist/dist.h"
#include "common/dist/dist_flags.h"
#include "common/train/distributed.h"
#include "task8/membership.h"

ABSL_FLAG(int64_t, inner_steps, 10, "task8: the updates each worker takes alone between two outer steps (H)");
ABSL_FLAG(double, outer_lr, 0.7, "task8: the outer optimizer's learning rate (1 with no momentum: local SGD)");
ABSL_FLAG(double, outer_momentum, 0.9, "task8: the outer optimizer's momentum (0: plain SGD)");
ABSL_FLAG(bool, outer_nesterov, true, "task8: Nesterov momentum for the outer optimizer (DiLoCo's)");
ABSL_FLAG(std::string, compression, "none", "task8: how the pseudo-gradient travels: none (float32) or int8 (8b)");
ABSL_FLAG(bool, elastic, false,
          "task8c: workers may leave (the others finish the round and go on) and join (--join) between rounds");
ABSL_FLAG(bool, join, false,
          "task8c: this worker starts late and joins a running --elastic job in the slot of --local_rank/--rank");
ABSL_FLAG(double, join_timeout_s, 600, "task8c: how long a joiner waits to be let in at a round's end");

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
    elastic_ = absl::GetFlag(FLAGS_elastic);
    joining_ = absl::GetFlag(FLAGS_join);
    if (joining_ && !elastic_) throw UserError("--join needs --elastic (the workers it joins run with --elastic)");
    train::DistInfo dist = joining_ ? ConnectLate() : train::InitDistributedFloat32Only(name(), "the pseudo-gradient");
    if (dist.world_size < 2 || (!dist.pg && !joining_)) {
      throw UserError("task8 trains 2 or more workers (--world_size, or tools/launch --nproc_per_node); "
                      "one worker alone is part 1");
    }
    if (elastic_ && !joining_) membership_ = std::make_unique<Membership>(train::DistContextOf(dist));
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
    fingerprint_ = Fingerprint(ctx);
    if (joining_) Join(ctx);
    outer_->Begin(ctx.parameters());
    if (joining_) outer_->LoadSharedState(joined_state_);
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
      EndRound(ctx, start);
      if (membership_) AdmitJoiners(ctx, u.position);
      if (membership_ && u.position.update >= u.schedule.total_updates()) membership_->Finish();
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
  std::optional<train::TrainingState> JoinedAt() const override { return joined_at_; }

 private:
  // 8c. The outer step; with --elastic, a failed one (a worker lost) is taken again among the
  // survivors, and the log's round line says who left.
  void EndRound(const train::StageContext& ctx, std::chrono::steady_clock::time_point start) {
    for (;;) {
      try {
        outer_->End(*ctx.dist().pg, ctx.parameters());
        return;
      } catch (const UserError&) {
        throw;
      } catch (const std::exception& e) {
        if (!membership_) throw;
        // Where a loss costs its time: the wait until the collective failed, then the regroup.
        const auto failed = std::chrono::steady_clock::now();
        figures_.fields["failed_after_ms"] = MsSince(start);
        const std::vector<int> lost = membership_->Regroup();
        figures_.fields["regroup_ms"] = MsSince(failed);
        UseGeneration(ctx);
        if (lost.empty()) {
          // Not a lost worker: trying again would fail the same way.
          throw UserError("task8: the outer step of round " + std::to_string(rounds_ + 1) +
                          " failed while every worker still answers: " + OneLine(e));
        }
        for (int s : lost) figures_.fields["left"].push_back(s);
        if (ctx.is_main_rank()) {
          std::printf("task8: round %lld: lost slot(s) %s (%s); %d worker(s) finish the round\n",
                      static_cast<long long>(rounds_ + 1), absl::StrJoin(lost, ", ").c_str(), OneLine(e).c_str(),
                      membership_->size());
          std::fflush(stdout);
        }
      }
    }
  }

  // At a round's end: workers waiting to join are let in and sent the parameters, the outer
  // state and where the run stands.
  void AdmitJoiners(const train::StageContext& ctx, const train::TrainingState& position) {
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int> joined = membership_->Admit(fingerprint_);
    if (joined.empty()) return;
    UseGeneration(ctx);
    std::vector<torch::Tensor> state;
    for (const auto& p : ctx.parameters()) state.push_back(p.detach().contiguous());
    std::vector<torch::Tensor> shared = outer_->SharedState();
    for (const auto& t : shared) state.push_back(t.contiguous());
    state.push_back(torch::tensor({position.update, position.epoch, position.batch_in_epoch, position.minibatches,
                                   rounds_ + 1, static_cast<int64_t>(shared.size())},
                                  torch::kLong));
    ShareTensors(*ctx.dist().pg, state);
    figures_.fields["admit_ms"] = MsSince(start);
    for (int s : joined) figures_.fields["joined"].push_back(s);
    if (ctx.is_main_rank()) {
      std::printf("task8: round %lld: slot(s) %s joined; %d worker(s) train on\n", static_cast<long long>(rounds_ + 1),
                  absl::StrJoin(joined, ", ").c_str(), membership_->size());
      std::fflush(stdout);
    }
  }

  // The joiner's side of AdmitJoiners.
  void Join(const train::StageContext& ctx) {
    membership_ = Membership::Join(train::DistContextOf(ctx.dist()), fingerprint_, absl::GetFlag(FLAGS_join_timeout_s));
    UseGeneration(ctx);
    std::vector<torch::Tensor> state;
    ShareTensors(*ctx.dist().pg, state);
    const std::vector<torch::Tensor>& params = ctx.parameters();
    const torch::Tensor where = state.back();
    const int64_t shared = where[5].item<int64_t>();
    if (state.size() != params.size() + static_cast<size_t>(shared) + 1) {
      throw std::logic_error("task8: a joiner received " + std::to_string(state.size()) + " tensors");
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(state[i]);
    joined_state_.assign(state.begin() + static_cast<std::ptrdiff_t>(params.size()), state.end() - 1);
    train::TrainingState at;
    at.update = where[0].item<int64_t>();
    at.epoch = where[1].item<int64_t>();
    at.batch_in_epoch = where[2].item<int64_t>();
    at.minibatches = where[3].item<int64_t>();
    rounds_ = where[4].item<int64_t>() - 1;
    joined_at_ = at;
    std::printf("task8: slot %d joined %d worker(s) after update %lld\n", membership_->slot(), membership_->size(),
                static_cast<long long>(at.update));
    std::fflush(stdout);
  }

  // The Trainer's collectives and the outer loop's go through the current generation's group.
  void UseGeneration(const train::StageContext& ctx) {
    ctx.ReplaceGroup(train::Counted(membership_->group()), membership_->rank(), membership_->size());
  }

  // A joiner must train the model the others train, on the same data in the same order.
  static std::string Fingerprint(const train::StageContext& ctx) {
    std::string shapes;
    for (const auto& [name, p] : ctx.named_parameters()) {
      shapes += name + ":";
      for (int64_t d : p.sizes()) shapes += std::to_string(d) + ",";
    }
    const train::TrainOptions& o = ctx.options();
    // The vocabulary's words, where the checkpoint has one (the same path may hold another file
    // on another host).
    std::string vocabulary = "built-in";
    if (!o.model_name_or_path.empty()) {
      std::ifstream in(o.model_name_or_path + "/vocab.txt", std::ios::binary);
      if (in) vocabulary = std::to_string(std::hash<std::string>{}(std::string(std::istreambuf_iterator<char>(in), {})));
    }
    return "parameters=" + std::to_string(std::hash<std::string>{}(shapes)) + "\nmodel=" + o.model_name_or_path +
           "\nvocabulary=" + vocabulary + "\ntask=" + o.task_name + "\nmax_seq_length=" +
           std::to_string(o.max_seq_length) + "\nseed=" + std::to_string(o.seed) +
           "\ninner_steps=" + std::to_string(absl::GetFlag(FLAGS_inner_steps));
  }

  // A joiner's process group comes from the membership, in BeforeTraining.
  static train::DistInfo ConnectLate() {
    auto ctx = std::make_shared<dist::DistContext>(dist::ConnectLate(dist::DistConfigFromFlagsAndEnv()));
    train::DistInfo info;
    info.rank = ctx->rank;
    info.world_size = ctx->world_size;
    info.local_rank = ctx->config.local_rank;
    info.backend = ctx->backend_name;
    info.described = "joined late: " + dist::DescribeDistConfig(ctx->config);
    info.keep_alive = ctx;
    return info;
  }

  bool elastic_ = false, joining_ = false;
  std::unique_ptr<Membership> membership_;
  std::string fingerprint_;
  std::vector<torch::Tensor> joined_state_;
  std::optional<train::TrainingState> joined_at_;
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
