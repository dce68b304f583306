#include "task7/pp_stage.h"

#include <torch/utils.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "common/dist/dist_flags.h"
#include "common/runtime/errors.h"
#include "common/trace/recorder.h"
#include "common/train/bert_adamw.h"
#include "common/train/distributed.h"
#include "task7/mesh.h"
#include "task7/pipeline_parallel.h"

ABSL_FLAG(int, micro_batches, 4, "task7 --model_parallel=pipeline: micro-batches per batch (M; must divide it)");
ABSL_FLAG(std::string, pipeline_schedule, "1f1b",
          "task7 --model_parallel=pipeline: 1f1b (one forward, one backward) or afab (all forward, all backward)");
ABSL_FLAG(int, pipeline_parallel_size, 0,
          "task7 --model_parallel=pipeline: stages per pipeline, P (0: all ranks, one pipeline: task 7b); below the "
          "world size W, W / P pipelines, each reading its own share of every batch (task 7c)");

namespace distlm::task7 {
namespace {

// Every tensor of `tensors` whose owner is stage st takes stage st's values, on every rank: one
// broadcast per stage of its tensors flattened together.
void BroadcastFromOwners(const std::vector<torch::Tensor>& tensors, const std::vector<int>& owner, int stages,
                         c10d::ProcessGroup& pg) {
  torch::NoGradGuard no_grad;
  for (int st = 0; st < stages; ++st) {
    std::vector<torch::Tensor> mine;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (owner[i] == st) mine.push_back(tensors[i].reshape({-1}));
    }
    if (mine.empty()) continue;
    std::vector<torch::Tensor> flat = {torch::cat(mine)};
    c10d::BroadcastOptions root;
    root.rootRank = st;
    pg.broadcast(flat, root)->wait();
    int64_t at = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (owner[i] != st) continue;
      tensors[i].copy_(flat[0].slice(0, at, at + tensors[i].numel()).view_as(tensors[i]));
      at += tensors[i].numel();
    }
  }
}

// AdamW over this stage's parameters; snapshots see the whole model's state, each tensor from
// the stage that trains it.
class PipelineOptimizer : public train::ForwardingOptimizer {
 public:
  PipelineOptimizer(const train::NamedParameters& all, std::vector<int> owner, int stage, int stages,
                    c10d::ProcessGroup* pg, const train::AdamWOptions& options)
      : ForwardingOptimizer(std::make_unique<train::BertAdamW>(Owned(all, owner, stage), options)),
        owner_(std::move(owner)),
        stage_(stage),
        stages_(stages),
        pg_(pg) {
    // The shapes, not the tensors: the other stages' parameters are released (empty) between
    // uses of the whole model.
    for (const auto& [name, p] : all) shapes_.push_back(p.sizes().vec());
  }

  train::OptimizerState GatherState() override {
    train::OptimizerState mine = inner().GatherState(), whole;
    whole.step = mine.step;
    size_t k = 0;
    for (size_t i = 0; i < shapes_.size(); ++i) {
      const bool own = owner_[i] == stage_;
      whole.exp_avg.push_back(own ? mine.exp_avg[k] : torch::zeros(shapes_[i]));
      whole.exp_avg_sq.push_back(own ? mine.exp_avg_sq[k] : torch::zeros(shapes_[i]));
      k += own;
    }
    BroadcastFromOwners(whole.exp_avg, owner_, stages_, *pg_);
    BroadcastFromOwners(whole.exp_avg_sq, owner_, stages_, *pg_);
    return whole;
  }

  void LoadState(const train::OptimizerState& whole) override {
    if (whole.exp_avg.size() != shapes_.size() || whole.exp_avg_sq.size() != shapes_.size()) {
      throw UserError("optimizer state has " + std::to_string(whole.exp_avg.size()) + " tensors, the model has " +
                      std::to_string(shapes_.size()) + " parameters");
    }
    train::OptimizerState mine;
    mine.step = whole.step;
    for (size_t i = 0; i < shapes_.size(); ++i) {
      if (owner_[i] != stage_) continue;
      mine.exp_avg.push_back(whole.exp_avg[i]);
      mine.exp_avg_sq.push_back(whole.exp_avg_sq[i]);
    }
    inner().LoadState(mine);
  }

 private:
  static train::NamedParameters Owned(const train::NamedParameters& all, const std::vector<int>& owner, int stage) {
    train::NamedParameters mine;
    for (size_t i = 0; i < all.size(); ++i) {
      if (owner[i] == stage) mine.push_back(all[i]);
    }
    return mine;
  }

  std::vector<std::vector<int64_t>> shapes_;
  std::vector<int> owner_;
  int stage_, stages_;
  c10d::ProcessGroup* pg_;
};

// The parameters that other stages train, released: each keeps its tensor (the model's and the
// Trainer's lists hold it) but not its storage, so that a rank holds its own block only.
void ReleaseOthers(const std::vector<torch::Tensor>& params, const std::vector<int>& owner, int stage) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    if (owner[i] != stage) params[i].set_data(torch::empty({0}, params[i].options()));
  }
}

// The others' parameters given storage of their shapes again, for the whole model's broadcast to
// fill.
void RestoreOthers(const std::vector<torch::Tensor>& params, const std::vector<int>& owner, int stage,
                   const std::vector<std::vector<int64_t>>& shapes) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    if (owner[i] != stage) params[i].set_data(torch::empty(shapes[i], params[i].options()));
  }
}

}  // namespace

PipelineParallelStage::PipelineParallelStage(std::string name, train::TrainStep step)
    : Stage(std::move(name), std::move(step)) {}

train::DistInfo PipelineParallelStage::Connect() {
  // The flags first, so that every rank fails at once with one line.
  micro_batches_ = absl::GetFlag(FLAGS_micro_batches);
  const std::string schedule = absl::GetFlag(FLAGS_pipeline_schedule);
  if (micro_batches_ < 1) throw UserError("--micro_batches=" + std::to_string(micro_batches_) + " must be at least 1");
  if (schedule != "1f1b" && schedule != "afab") {
    throw UserError("--pipeline_schedule=" + schedule + " is not 1f1b or afab");
  }
  schedule_ = schedule == "afab" ? PipelineSchedule::kAllForwardAllBackward : PipelineSchedule::kOneForwardOneBackward;
  const dist::DistConfig config = dist::DistConfigFromFlagsAndEnv();
  const int stages = ReplicaSize("pipeline_parallel_size", absl::GetFlag(FLAGS_pipeline_parallel_size), config);
  train::DistInfo info = train::InitDistributedFloat32Only(name(), "its sends carry activations, not gradients");
  Mesh mesh = MakeCheckedMesh(info, stages, "pipeline");
  mesh_ = mesh.layout;
  pg_ = mesh.model_pg;
  data_pg_ = mesh.data_pg;
  counting_ = mesh.counting;
  return info;
}

std::unique_ptr<train::Optimizer> PipelineParallelStage::MakeOptimizer(const train::StageContext& ctx) {
  const train::TrainOptions& o = ctx.options();
  if (o.fp16 || o.bf16) throw UserError(name() + " --model_parallel=pipeline trains in float32 only (--fp16, --bf16)");
  if (o.per_device_train_batch_size % micro_batches_ != 0) {
    throw UserError("--micro_batches=" + std::to_string(micro_batches_) + " does not divide --per_gpu_train_batch_size=" +
                    std::to_string(o.per_device_train_batch_size));
  }
  const int stages = pg_ ? pg_->getSize() : 1, stage = pg_ ? pg_->getRank() : 0;
  const std::vector<model::Unit>& units = ctx.units();
  const int layers = static_cast<int>(units.size()) - 2;
  if (!pg_ || stages < 2) throw UserError(name() + " --model_parallel=pipeline needs at least 2 ranks (its stages)");
  try {
    units_ = StageUnits(layers, stages, stage);
  } catch (const std::invalid_argument& e) {
    throw UserError(e.what());
  }
  steps_ = StageSteps(schedule_, stages, stage, micro_batches_);  // the student's
  // Which stage trains each parameter: the stage of its unit.
  std::map<std::string, int> stage_of;
  for (int st = 0; st < stages; ++st) {
    const UnitRange r = StageUnits(layers, stages, st);
    for (int u = r.first; u <= r.last; ++u) {
      for (const std::string& p : units[u].parameters) stage_of[p] = st;
    }
  }
  owner_.clear();
  owned_.clear();
  shapes_.clear();
  int64_t mine = 0;
  for (const auto& [pname, p] : ctx.named_parameters()) {
    shapes_.push_back(p.sizes().vec());
    owner_.push_back(stage_of.at(pname));
    if (owner_.back() != stage) continue;
    mine += p.numel();
    owned_.push_back(p);
  }
  if (ctx.is_main_rank()) {
    const std::string replicas =
        data_pg_ ? " x " + std::to_string(mesh_.data_size) + " data-parallel replica(s), each reading its share of "
                                                             "every batch"
                 : "; every rank reads every batch";
    std::printf("%s: pipeline of %d stages (%s), %s over %d micro-batches of each batch; stage 0 holds units %d..%d "
                "(%lld parameters)%s\n",
                name().c_str(), stages, ctx.dist().backend.c_str(),
                schedule_ == PipelineSchedule::kAllForwardAllBackward ? "all forward, all backward" : "1F1B",
                micro_batches_, units_.first, units_.last, static_cast<long long>(mine), replicas.c_str());
    std::fflush(stdout);
  }
  auto optimizer = std::make_unique<PipelineOptimizer>(ctx.named_parameters(), owner_, stage, stages, pg_.get(),
                                                       train::AdamWOptionsFor(o));
  ReleaseOthers(ctx.parameters(), owner_, stage);
  return optimizer;
}

double PipelineParallelStage::ForwardBackward(const train::StageContext& ctx, const std::vector<int64_t>& indices,
                                              int64_t epoch, double loss_divisor) {
  const int64_t start = trace::NowNs();
  // An epoch's last batch may be short: the most micro-batches, up to M, that cut it evenly (every
  // stage of a pipeline reads the same batch, so every stage picks the same).
  int parts = micro_batches_;
  while (static_cast<int64_t>(indices.size()) % parts != 0) --parts;
  model::UnitsBatch batch = ctx.BatchForUnits(indices, parts, epoch);
  std::vector<StepTiming> timings;
  const PipelineStage stage = MakePipelineStage(batch, units_, loss_divisor, pg_, &timings);
  const double loss = RunPipelineSteps(  // the student's loop, on the student's schedule
      stage, parts == micro_batches_ ? steps_ : StageSteps(schedule_, stage.stages, stage.stage, parts));
  // The batch's loss, from the last stage to every rank's log.
  std::vector<torch::Tensor> t = {torch::full({1}, loss, torch::kDouble)};
  c10d::BroadcastOptions root;
  root.rootRank = stage.stages - 1;
  pg_->broadcast(t, root)->wait();
  const int64_t end = trace::NowNs();
  // Each step a span of the trace (--trace): the schedule and its bubble, stage by stage.
  if (trace::Recorder* r = trace::Recorder::Active()) {
    for (const StepTiming& s : timings) {
      r->Span(s.step.forward ? trace::cat::kForward : trace::cat::kBackward,
              std::string(s.step.forward ? "F" : "B") + std::to_string(s.step.micro_batch), s.start_ns, s.end_ns,
              {{"micro_batch", s.step.micro_batch}});
    }
  }
  // The most micro-batches this stage held between their forward and their backward, as the
  // steps ran (1F1B: at most P - s; all forward all backward: M).
  int in_flight = 0;
  for (const StepTiming& s : timings) {
    in_flight += s.step.forward ? 1 : -1;
    in_flight_peak_ = std::max(in_flight_peak_, in_flight);
  }
  busy_ms_ += FiguresOf(timings, start, end).busy_ms;
  span_ms_ += static_cast<double>(end - start) / 1e6;
  return t[0].item<double>() * loss_divisor;
}

void PipelineParallelStage::SyncGradients(const train::StageContext&) {
  // The student's average, over the stages that hold the same layers in the other pipelines.
  if (data_pg_) AverageOverDataGroup(owned_, data_pg_);
}

double PipelineParallelStage::OptimizerStep(const train::StageContext&, train::UpdateContext& u) {
  // The whole model's norm: this stage's squared norms, and the other stages' as one more entry
  // (each rank puts its sum at its index of P numbers; one all-reduce in its pipeline; the
  // pipelines' gradients are the same by now).
  const int stages = pg_->getSize(), stage = pg_->getRank();
  const double total = train::ClipGradNorm(
      u.parameters, u.max_grad_norm, [&](std::vector<torch::Tensor>& norms, const std::vector<size_t>&) {
        std::vector<torch::Tensor> each = {torch::zeros({stages})};
        each[0][stage] = torch::stack(norms).square().sum();
        pg_->allreduce(each)->wait();
        each[0][stage] = 0;
        norms.push_back(each[0].sum().sqrt());
      });
  step().optimizer_step(u);
  return total;
}

train::UpdateFigures PipelineParallelStage::TakeFigures() {
  train::UpdateFigures f;
  // Every group's collectives and sends: the pipeline's, the data group's average, the world's
  // averaging of the loss.
  if (!counting_.empty()) f.comm = TakeMergedStats(counting_);
  // This rank's share of the update's pipelines spent in neither forward nor backward.
  f.fields = {{"micro_batches", micro_batches_},
              {"pipeline_idle_share", span_ms_ > 0 ? 1 - busy_ms_ / span_ms_ : 0.0},
              {"pipeline_in_flight_peak", in_flight_peak_}};
  in_flight_peak_ = 0;
  if (data_pg_) {
    f.fields["pipeline_parallel"] = mesh_.tensor_size;
    f.fields["data_parallel"] = mesh_.data_size;
  }
  busy_ms_ = span_ms_ = 0;
  return f;
}

void PipelineParallelStage::WithFullParameters(const train::StageContext& ctx, const std::function<void()>& use) {
  if (owner_.empty()) return use();  // not cut yet: every rank holds the whole model
  const std::vector<torch::Tensor>& params = ctx.parameters();
  const int stage = pg_->getRank();
  RestoreOthers(params, owner_, stage, shapes_);
  BroadcastFromOwners(params, owner_, pg_->getSize(), *pg_);
  try {
    use();
  } catch (...) {
    ReleaseOthers(params, owner_, stage);
    throw;
  }
  ReleaseOthers(params, owner_, stage);
}

std::unique_ptr<train::Stage> MakePipelineParallelStage(std::string name, train::TrainStep step) {
  return std::make_unique<PipelineParallelStage>(std::move(name), std::move(step));
}

}  // namespace distlm::task7
