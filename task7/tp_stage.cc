#include "task7/tp_stage.h"

#include <torch/utils.h>

#include <cmath>
#include <cstdio>
#include <utility>

#include "absl/flags/flag.h"
#include "common/dist/counting_process_group.h"
#include "common/dist/dist_flags.h"
#include "common/runtime/errors.h"
#include "common/train/bert_adamw.h"
#include "common/train/distributed.h"
#include "task7/mesh.h"
#include "task7/tensor_parallel.h"
#include "task7/tensor_parallel_ops.h"

ABSL_FLAG(int, tensor_parallel_size, 0,
          "task7: ranks per model replica, T (0: all of them, one replica: task 7a); below the world size W, "
          "W / T replicas of T ranks, each reading its own share of every batch (task 7c)");

namespace distlm::task7 {
namespace {

// The Trainer's optimizer with the shards' state inside; snapshots see it whole: GatherState
// puts each cut tensor's blocks together (a collective), LoadState keeps this rank's block.
class TensorParallelOptimizer : public train::ForwardingOptimizer {
 public:
  TensorParallelOptimizer(std::unique_ptr<train::Optimizer> inner, const model::ParallelOps* ops,
                          std::vector<int> cut_dim, c10d::ProcessGroup* pg)
      : ForwardingOptimizer(std::move(inner)), ops_(ops), cut_dim_(std::move(cut_dim)), pg_(pg) {}

  // The shards' gradients differ between ranks: an fp16 overflow in one is voted on by all.
  c10d::ProcessGroup* overflow_vote_group() const override { return pg_; }

  train::OptimizerState GatherState() override {
    train::OptimizerState s = inner().GatherState();
    for (size_t i = 0; i < cut_dim_.size() && i < s.exp_avg.size(); ++i) {
      if (cut_dim_[i] < 0) continue;
      s.exp_avg[i] = ops_->GatherBlocks(s.exp_avg[i], cut_dim_[i]);
      s.exp_avg_sq[i] = ops_->GatherBlocks(s.exp_avg_sq[i], cut_dim_[i]);
    }
    return s;
  }

  void LoadState(const train::OptimizerState& whole) override {
    train::OptimizerState live = inner().GatherState();
    if (whole.exp_avg.size() != live.exp_avg.size() || whole.exp_avg_sq.size() != live.exp_avg_sq.size()) {
      throw UserError("optimizer state has " + std::to_string(whole.exp_avg.size()) + " tensors, the model has " +
                      std::to_string(live.exp_avg.size()) + " parameters");
    }
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < live.exp_avg.size(); ++i) {
      const int dim = i < cut_dim_.size() ? cut_dim_[i] : -1;
      auto mine = [&](const torch::Tensor& t) {
        return dim < 0 ? t : (dim == 0 ? ShardRows(t, ops_->rank(), ops_->world())
                                       : ShardColumns(t, ops_->rank(), ops_->world()));
      };
      live.exp_avg[i] = mine(whole.exp_avg[i]);
      live.exp_avg_sq[i] = mine(whole.exp_avg_sq[i]);
    }
    live.step = whole.step;
    inner().LoadState(live);
  }

 private:
  const model::ParallelOps* ops_;
  std::vector<int> cut_dim_;
  c10d::ProcessGroup* pg_;
};

}  // namespace

TensorParallelStage::TensorParallelStage(std::string name, train::TrainStep step)
    : Stage(std::move(name), std::move(step)) {}

TensorParallelStage::~TensorParallelStage() = default;

train::DistInfo TensorParallelStage::Connect() {
  // The flag against the world size first, so that every rank fails at once with one line.
  const int tensor_size =
      ReplicaSize("tensor_parallel_size", absl::GetFlag(FLAGS_tensor_parallel_size), dist::DistConfigFromFlagsAndEnv());
  train::DistInfo info = train::InitDistributedFloat32Only(name(), "its all-reduces carry activations, not gradients");
  Mesh mesh = MakeCheckedMesh(info, tensor_size, "tensor");
  mesh_ = mesh.layout;
  tensor_pg_ = mesh.model_pg;
  data_pg_ = mesh.data_pg;
  counting_ = mesh.counting;
  return info;
}

void TensorParallelStage::SyncGradients(const train::StageContext& ctx) {
  if (data_pg_) AverageOverDataGroup(ctx.parameters(), data_pg_);
}

std::unique_ptr<train::Optimizer> TensorParallelStage::MakeOptimizer(const train::StageContext& ctx) {
  std::vector<std::vector<int64_t>> whole;
  for (const auto& [name, p] : ctx.named_parameters()) whole.push_back(p.sizes().vec());
  ops_ = std::make_unique<GroupParallelOps>(tensor_pg_);
  ctx.SetTensorParallel(ops_.get());  // a UserError naming the sizes when they do not divide
  split_ = true;
  cut_dim_.clear();
  int64_t cut = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    const auto now = ctx.named_parameters()[i].second.sizes();
    int dim = -1;
    for (size_t d = 0; d < now.size(); ++d) {
      if (now[d] != whole[i][d]) dim = static_cast<int>(d);
    }
    cut_dim_.push_back(dim);
    cut += dim >= 0;
  }
  if (ctx.is_main_rank()) {
    if (data_pg_) {
      std::printf("%s: tensor parallel over %d rank(s) x %d data-parallel replica(s) (%s): %lld of %zu parameters "
                  "cut, each replica reads its share of every batch\n",
                  name().c_str(), mesh_.tensor_size, mesh_.data_size, ctx.dist().backend.c_str(),
                  static_cast<long long>(cut), cut_dim_.size());
    } else {
      std::printf("%s: tensor parallel over %d rank(s) (%s): %lld of %zu parameters cut, every rank reads every batch\n",
                  name().c_str(), ctx.dist().world_size, ctx.dist().backend.c_str(), static_cast<long long>(cut),
                  cut_dim_.size());
    }
    std::fflush(stdout);
  }
  return std::make_unique<TensorParallelOptimizer>(Stage::MakeOptimizer(ctx), ops_.get(), cut_dim_,
                                                   ctx.dist().pg.get());
}

double TensorParallelStage::OptimizerStep(const train::StageContext& ctx, train::UpdateContext& u) {
  // Part 1's clip with the whole model's norm: a cut tensor's squared norm is the sum of its
  // blocks' over the tensor group (the data group's ranks hold the same blocks, averaged by
  // now), one all-reduce for all of them; the replicated ones count once.
  const double total = train::ClipGradNorm(
      u.parameters, u.max_grad_norm, [&](std::vector<torch::Tensor>& norms, const std::vector<size_t>& index) {
        std::vector<size_t> cut;
        for (size_t k = 0; k < index.size(); ++k) {
          if (cut_dim_[index[k]] >= 0) cut.push_back(k);
        }
        if (cut.empty()) return;
        std::vector<torch::Tensor> cut_norms;
        for (size_t k : cut) cut_norms.push_back(norms[k]);
        std::vector<torch::Tensor> squares = {torch::stack(cut_norms).square()};
        tensor_pg_->allreduce(squares)->wait();
        const torch::Tensor whole = squares[0].sqrt();
        for (size_t j = 0; j < cut.size(); ++j) norms[cut[j]] = whole[static_cast<int64_t>(j)];
      });
  // Part 1's step: its clip sees this rank's share of the clipped gradients, whose norm is
  // below the limit, and leaves them.
  step().optimizer_step(u);
  return total;
}

void TensorParallelStage::WithFullParameters(const train::StageContext& ctx, const std::function<void()>& use) {
  if (!split_) return use();
  ctx.SetTensorParallel(nullptr);
  try {
    use();
  } catch (...) {
    ctx.SetTensorParallel(ops_.get());
    throw;
  }
  ctx.SetTensorParallel(ops_.get());
}

train::UpdateFigures TensorParallelStage::TakeFigures() {
  train::UpdateFigures f;
  // Every collective since the last update's figures, in every group: the forward's and
  // backward's all-reduces, the data group's average, the norm's, and the Trainer's averaging of
  // the previous update's loss.
  if (!counting_.empty()) f.comm = TakeMergedStats(counting_);
  if (data_pg_) f.fields = {{"tensor_parallel", mesh_.tensor_size}, {"data_parallel", mesh_.data_size}};
  return f;
}

std::unique_ptr<train::Stage> MakeTensorParallelStage(std::string name, train::TrainStep step) {
  return std::make_unique<TensorParallelStage>(std::move(name), std::move(step));
}

}  // namespace distlm::task7
