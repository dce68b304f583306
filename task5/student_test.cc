// Task 5's local tests: bazel test //task5:student_test
//
// On 2 and 4 real ranks (Gloo over 127.0.0.1): each rank's gradient is a function of its rank,
// so every rank computes by itself what one process would do (average the gradients, clip by
// their norm, one AdamW step) and compares its parameters after your ShardedStep with it,
// block by block, then the norm it returned. A difference is matched against what each usual
// mistake gives, computed here too (the sum, this rank's own gradient, another block, ...), to
// name the mistake. Clipping and AdamW hide a scale factor in the gradient (the sum's update
// equals the mean's), so some mistakes show only in the returned norm.
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/rank_test.h"
#include "common/train/bert_adamw.h"
#include "task5/sharded_step.h"

namespace distlm::task5 {
namespace {

using testing::Fail;
using testing::RankEnv;
using Params = std::vector<std::pair<std::string, torch::Tensor>>;

// 43 elements: shards of 22 (2 ranks, 1 padding) or 11 (4 ranks, 1 padding). Names decide
// weight decay (none for biases and LayerNorm weights), as in BERT.
Params MakeParams() {
  torch::manual_seed(5);
  return {{"dense.weight", torch::randn({4, 5}).requires_grad_()},
          {"dense.bias", torch::randn({5}).requires_grad_()},
          {"LayerNorm.weight", torch::randn({7}).requires_grad_()},
          {"out.weight", torch::randn({3, 3}).requires_grad_()},
          {"out.bias", torch::randn({2}).requires_grad_()}};
}

std::vector<torch::Tensor> GradsOfRank(const Params& params, int rank, int update) {
  torch::manual_seed(100 + 17 * rank + update);
  std::vector<torch::Tensor> g;
  for (const auto& [name, p] : params) g.push_back(torch::randn(p.sizes()) * (1 + rank));
  return g;
}

train::AdamWOptions Adam() {
  train::AdamWOptions adam;
  adam.lr = 1e-2;
  adam.weight_decay = 0.1;
  return adam;
}

torch::Tensor Flat(const Params& params) {
  std::vector<torch::Tensor> v;
  for (const auto& [name, p] : params) v.push_back(p.detach().reshape(-1));
  return torch::cat(v);
}

// One process: gradients combined by `combine` (the average, or a wrong variant), clipped,
// one AdamW step from the same starting point. Returns the flat parameters and the norm.
std::pair<torch::Tensor, double> OneProcess(int world, int updates, double max_norm,
                                            const std::function<torch::Tensor(int, int, size_t)>& grad_of) {
  Params ref = MakeParams();
  train::BertAdamW opt(ref, Adam());
  std::vector<torch::Tensor> ps;
  for (auto& [name, p] : ref) ps.push_back(p);
  double norm = 0;
  for (int u = 0; u < updates; ++u) {
    for (size_t i = 0; i < ref.size(); ++i) ref[i].second.mutable_grad() = grad_of(world, u, i);
    norm = train::ClipGradNorm(ps, max_norm);
    opt.Step();
  }
  return {Flat(ref), norm};
}

std::string Block(int r, int64_t s) {
  return "block " + std::to_string(r) + " (elements " + std::to_string(r * s) + ".." + std::to_string((r + 1) * s - 1) +
         ", owned by rank " + std::to_string(r) + ")";
}

std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

// The gradients of one update laid out as ShardedAdamW lays them out: registration order,
// padded with zeros to `padded` elements.
torch::Tensor FlatGrad(const std::vector<torch::Tensor>& g, int64_t padded) {
  std::vector<torch::Tensor> v;
  for (const auto& t : g) v.push_back(t.reshape(-1));
  torch::Tensor flat = torch::cat(v);
  return torch::cat({flat, torch::zeros({padded - flat.numel()})});
}

// A shard for StepShard and the norm to clip it by (< 0: not clipped).
struct ShardInput {
  torch::Tensor shard;
  double norm;
};

// Rank `rank`'s block after `updates` sharded updates that each step with the shard and clip
// by the norm `input(u)` gives: the arithmetic of ShardedStep with one mistake in what reaches
// the step, on a ShardedAdamW of this process, without communication.
torch::Tensor SimulatedBlock(int rank, int world, int updates, double max_norm,
                             const std::function<ShardInput(int)>& input) {
  torch::NoGradGuard no_grad;
  zero::ShardedAdamW sim(MakeParams(), Adam(), rank, world);
  for (int u = 0; u < updates; ++u) {
    ShardInput in = input(u);
    sim.grad_shard().copy_(in.shard);
    if (in.norm >= 0) sim.ScaleGradShard(in.norm, max_norm);
    sim.StepShard();
  }
  return sim.param_shard().clone();
}

// One rank's check of ShardedStep: its parameters after `updates` updates against one
// process's, block by block, then the norm it returned. A wrong block or norm is compared with
// what each typical mistake would give, to name the mistake.
class ShardedStepCheck {
 public:
  ShardedStepCheck(RankEnv& env, double max_norm, int updates)
      : env_(env),
        max_norm_(max_norm),
        updates_(updates),
        mine_(MakeParams()),
        opt_(mine_, Adam(), env.rank, env.world),
        S_(opt_.layout().shard_numel()),
        total_(opt_.layout().total_numel()),
        padded_(opt_.layout().padded_numel()),
        N_(env.world),
        me_(env.rank),
        when_("after " + std::to_string(updates) + " update(s)") {}

  void Run() {
    const double norm = RunUpdates();
    want_ = OneProcess(N_, updates_, max_norm_, Averaged());
    got_ = opt_.flat_params().narrow(0, 0, total_);
    // Own block first: it is what this rank's step wrote.
    if (!BlockOk(got_, want_.first, me_)) DiagnoseOwnBlock();
    for (int r = 0; r < N_; ++r) {
      if (r != me_ && !BlockOk(got_, want_.first, r)) DiagnoseOtherBlock(r);
    }
    // The parameters are right; the returned norm (of the last update) is compared with what
    // each mistake would return.
    if (std::abs(norm - want_.second) > 1e-5 * want_.second) DiagnoseNorm(norm);
  }

 private:
  // The student's ShardedStep, `updates_` times; the norm it returned last.
  double RunUpdates() {
    double norm = 0;
    for (int u = 0; u < updates_; ++u) {
      {
        torch::NoGradGuard no_grad;
        auto g = GradsOfRank(MakeParams(), me_, u);
        for (size_t i = 0; i < mine_.size(); ++i) mine_[i].second.mutable_grad().copy_(g[i]);
      }
      const int64_t steps = opt_.step_count();
      norm = ShardedStep(*env_.pg, opt_, max_norm_);
      if (opt_.step_count() != steps + 1) {
        Fail("ShardedStep called opt.StepShard() " + std::to_string(opt_.step_count() - steps) + " time(s) in update " +
             std::to_string(u + 1) + "; call it exactly once per update");
      }
      opt_.ZeroGrad();
    }
    return norm;
  }

  // Parameter i's gradient averaged over `world` ranks, in update u.
  static std::function<torch::Tensor(int, int, size_t)> Averaged() {
    return [](int world, int u, size_t i) {
      torch::Tensor sum = torch::zeros_like(GradsOfRank(MakeParams(), 0, u)[i]);
      for (int r = 0; r < world; ++r) sum += GradsOfRank(MakeParams(), r, u)[i];
      return sum / world;
    };
  }

  // Compares the real (unpadded) elements of block r.
  bool BlockOk(const torch::Tensor& a, const torch::Tensor& b, int r) const {
    const int64_t begin = r * S_, n = std::min<int64_t>(S_, total_ - begin);
    if (n <= 0) return true;
    return torch::allclose(a.narrow(0, begin, n), b.narrow(0, begin, n), 1e-5, 1e-6);
  }

  // Every rank's gradients of update u, flat: the mean, and rank r's own; a rank's shard of one.
  torch::Tensor FlatMean(int u) const {
    std::vector<torch::Tensor> g;
    for (size_t i = 0; i < mine_.size(); ++i) g.push_back(Averaged()(N_, u, i));
    return FlatGrad(g, padded_);
  }
  torch::Tensor FlatOwn(int r, int u) const { return FlatGrad(GradsOfRank(MakeParams(), r, u), padded_); }
  torch::Tensor Shard(const torch::Tensor& flat, int r) const { return flat.narrow(0, r * S_, S_); }

  // This rank's block equals the one a simulated run fed by `input` ends with.
  bool Matches(const std::function<ShardInput(int)>& input) const {
    torch::Tensor block = SimulatedBlock(me_, N_, updates_, max_norm_, input);
    torch::Tensor whole = torch::zeros({padded_});
    whole.narrow(0, me_ * S_, S_).copy_(block);
    return BlockOk(got_, whole.narrow(0, 0, total_), me_);
  }

  void DiagnoseOwnBlock() const {
    const std::string yours = when_ + ", your " + Block(me_, S_) + " ";
    if (BlockOk(got_, Flat(MakeParams()), me_)) {
      Fail(yours + "still holds the initial weights: the step's result did not reach opt.flat_params()");
    }
    if (Matches([&](int u) {
          torch::Tensor sum = FlatMean(u) * N_;
          return ShardInput{Shard(sum, me_), sum.norm().item<double>()};
        })) {
      Fail(yours + "was updated with the SUM of the ranks' gradients, not their mean: divide the reduce-scattered "
           "shard by the world size (" + std::to_string(N_) + ")");
    }
    if (Matches([&](int u) {
          // Every rank steps its block of its own gradient; ClipGradShard sums those blocks' squares.
          double sq = 0;
          for (int r = 0; r < N_; ++r) sq += Shard(FlatOwn(r, u), r).pow(2).sum().item<double>();
          return ShardInput{Shard(FlatOwn(me_, u), me_), std::sqrt(sq)};
        })) {
      Fail(yours + "was updated with this rank's own gradient, not the average over ranks: reduce the gradient "
           "across ranks (reduce-scatter, or all-reduce and narrow) before the step");
    }
    for (int k = 0; k < N_; ++k) {
      if (k != me_ && Matches([&](int u) {
            torch::Tensor mean = FlatMean(u);
            return ShardInput{Shard(mean, k), mean.norm().item<double>()};
          })) {
        Fail(yours + "was updated with the gradient of " + Block(k, S_) +
             ": step with your own block of the reduced gradient, elements [rank * S, (rank + 1) * S)");
      }
    }
    if (Matches([&](int) { return ShardInput{torch::zeros({S_}), -1}; })) {
      Fail(yours + "was updated with a zero gradient (only weight decay moved it): the reduced gradient never "
           "reached opt.grad_shard(), which opt.StepShard() reads");
    }
    if (Matches([&](int u) {
          torch::Tensor mine_of_mean = Shard(FlatMean(u), me_);
          return ShardInput{mine_of_mean, mine_of_mean.norm().item<double>()};
        })) {
      Fail(yours + "was clipped by the norm of this rank's shard alone, not of the whole gradient: clip with "
           "opt.ClipGradShard(pg, max_grad_norm), which all-reduces the squared shard norms");
    }
    if (Matches([&](int u) { return ShardInput{Shard(FlatMean(u), me_), -1}; })) {
      Fail(yours + "matches an update without clipping: call opt.ClipGradShard(pg, max_grad_norm) before "
           "opt.StepShard() (clipping after the step changes nothing the step used)");
    }
    if (Matches([&](int u) {
          torch::Tensor twice = FlatMean(u) / N_;
          return ShardInput{Shard(twice, me_), twice.norm().item<double>()};
        })) {
      Fail(yours + "was updated with the mean divided by the world size (" + std::to_string(N_) +
           ") once too often: divide the summed shard once");
    }
    Fail(yours + "differs from one process's clipped AdamW update on the averaged gradient (did you clip by the "
         "global norm, with opt.ClipGradShard, before opt.StepShard()?)");
  }

  void DiagnoseOtherBlock(int r) const {
    if (BlockOk(got_, Flat(MakeParams()), r)) {
      Fail(when_ + ", " + Block(r, S_) + " still holds the initial weights on this rank: the ranks never shared "
           "their updated blocks (all-gather the shards into opt.flat_params(), after opt.StepShard())");
    }
    if (updates_ > 1 && BlockOk(got_, OneProcess(N_, updates_ - 1, max_norm_, Averaged()).first, r)) {
      Fail(when_ + ", " + Block(r, S_) + " on this rank holds rank " + std::to_string(r) +
           "'s block from before the last update: all-gather after opt.StepShard(), not before");
    }
    Fail(when_ + ", " + Block(r, S_) + " on this rank differs from rank " + std::to_string(r) +
         "'s updated block: every rank must end with every rank's updated block (all-gather)");
  }

  void DiagnoseNorm(double norm) const {
    const double want_norm = want_.second;
    auto near = [&](double x) { return std::abs(norm - x) <= 1e-5 * std::abs(x) + 1e-9; };
    const torch::Tensor mean = FlatMean(updates_ - 1);
    const std::string returned = "ShardedStep returned " + Num(norm) + ", ";
    if (near((mean * N_).norm().item<double>())) {
      Fail(returned + "the norm of the SUM of the ranks' gradients, not their mean (whose norm is " + Num(want_norm) +
           "): divide the reduce-scattered shard by the world size (" + std::to_string(N_) +
           ") before clipping; clipping scaled the sum down, which is why the parameters still came out right");
    }
    if (near(want_norm * std::min(1.0, max_norm_ / (want_norm + 1e-6)))) {
      Fail(returned + "the norm after clipping: return the norm before clipping (" + Num(want_norm) +
           "), what opt.ClipGradShard returns");
    }
    if (near(Shard(mean, me_).norm().item<double>())) {
      Fail(returned + "the norm of this rank's shard alone, not of the whole averaged gradient (" + Num(want_norm) +
           "): clip with opt.ClipGradShard(pg, max_grad_norm), which all-reduces the squared shard norms, and return "
           "what it returns");
    }
    if (near(want_norm / N_)) {
      Fail(returned + "the norm of the mean divided by the world size (" + std::to_string(N_) +
           ") once too often (the mean's is " + Num(want_norm) + "): divide the summed shard once");
    }
    if (near(want_norm * want_norm)) {
      Fail(returned + "the squared norm: return the norm (" + Num(want_norm) + "), what opt.ClipGradShard returns");
    }
    Fail(returned + "but the norm of the averaged gradient before clipping is " + Num(want_norm) +
         ": return what opt.ClipGradShard returns");
  }

  RankEnv& env_;
  const double max_norm_;
  const int updates_;
  Params mine_;
  zero::ShardedAdamW opt_;
  const int64_t S_, total_, padded_;
  const int N_, me_;
  const std::string when_;
  std::pair<torch::Tensor, double> want_;  // one process's flat parameters and last norm
  torch::Tensor got_;                      // this rank's flat parameters (unpadded)
};

void Check(RankEnv& env, double max_norm, int updates) { ShardedStepCheck(env, max_norm, updates).Run(); }

}  // namespace

RANK_CASE(one_update) { Check(env, /*max_norm=*/1.0, 1); }
RANK_CASE(three_clipped_updates) { Check(env, /*max_norm=*/0.5, 3); }

TEST(Task5ShardedStep, OneUpdateMatchesOneProcess) {
  EXPECT_RANKS_PASS("one_update", 2);
  EXPECT_RANKS_PASS("one_update", 4);
}
TEST(Task5ShardedStep, ThreeClippedUpdatesMatchOneProcess) {
  EXPECT_RANKS_PASS("three_clipped_updates", 2);
  EXPECT_RANKS_PASS("three_clipped_updates", 4);
}

}  // namespace distlm::task5
