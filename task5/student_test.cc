// Task 5's local tests: bazel test //task5:student_test
//
// On 2 and 4 real ranks (Gloo over 127.0.0.1): each rank's gradient is a function of its rank,
// so every rank computes by itself what one process would do (average the gradients, clip by
// their norm, one AdamW step) and compares its parameters after your ShardedStep with it,
// block by block, saying which part of the update went wrong.
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
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

void Check(RankEnv& env, double max_norm, int updates) {
  Params mine = MakeParams();
  zero::ShardedAdamW opt(mine, Adam(), env.rank, env.world);
  const int64_t S = opt.layout().shard_numel(), total = opt.layout().total_numel();
  auto grads_of_rank = [&](int r, int u) { return GradsOfRank(MakeParams(), r, u); };
  auto average = [&](int world, int u, size_t i) {
    torch::Tensor sum = torch::zeros_like(grads_of_rank(0, u)[i]);
    for (int r = 0; r < world; ++r) sum += grads_of_rank(r, u)[i];
    return sum / world;
  };
  double norm = 0;
  for (int u = 0; u < updates; ++u) {
    {
      torch::NoGradGuard no_grad;
      auto g = grads_of_rank(env.rank, u);
      for (size_t i = 0; i < mine.size(); ++i) mine[i].second.mutable_grad().copy_(g[i]);
    }
    const int64_t steps = opt.step_count();
    norm = ShardedStep(*env.pg, opt, max_norm);
    if (opt.step_count() != steps + 1) {
      Fail("ShardedStep called opt.StepShard() " + std::to_string(opt.step_count() - steps) +
           " time(s) in update " + std::to_string(u + 1) + "; call it exactly once per update");
    }
    opt.ZeroGrad();
  }
  auto [want, want_norm] = OneProcess(env.world, updates, max_norm, average);
  torch::Tensor got = opt.flat_params().narrow(0, 0, total);
  const std::string when = "after " + std::to_string(updates) + " update(s)";
  // Own block first: it is what this rank's step wrote.
  auto block_ok = [&](const torch::Tensor& a, const torch::Tensor& b, int r) {
    const int64_t begin = r * S, n = std::min<int64_t>(S, total - begin);
    if (n <= 0) return true;
    return torch::allclose(a.narrow(0, begin, n), b.narrow(0, begin, n), 1e-5, 1e-6);
  };
  if (!block_ok(got, want, env.rank)) {
    auto local = [&](int, int u, size_t i) { return grads_of_rank(env.rank, u)[i]; };
    auto summed = [&](int world, int u, size_t i) { return average(world, u, i) * world; };
    if (block_ok(got, OneProcess(env.world, updates, max_norm, summed).first, env.rank)) {
      Fail("your " + Block(env.rank, S) + " was updated with the SUM of the ranks' gradients, not their mean: "
           "divide the reduced shard by the number of ranks (" + std::to_string(env.world) + ") " + when);
    }
    if (block_ok(got, OneProcess(env.world, updates, max_norm, local).first, env.rank)) {
      Fail("your " + Block(env.rank, S) + " was updated with this rank's own gradient: the gradient shard must be "
           "the average over ranks (reduce it across ranks before the step) " + when);
    }
    if (block_ok(got, Flat(MakeParams()), env.rank)) {
      Fail("your " + Block(env.rank, S) + " still holds the initial weights " + when +
           ": the step's result did not reach opt.flat_params()");
    }
    Fail("your " + Block(env.rank, S) + " differs from one process's clipped AdamW update on the averaged gradient " +
         when + " (did you clip by the global norm, with opt.ClipGradShard, before opt.StepShard()?)");
  }
  for (int r = 0; r < env.world; ++r) {
    if (r == env.rank || block_ok(got, want, r)) continue;
    if (block_ok(got, Flat(MakeParams()), r) && updates == 1) {
      Fail(Block(r, S) + " still holds the initial weights on this rank: the ranks never shared their updated "
           "blocks (all-gather the shards into opt.flat_params())");
    }
    Fail(Block(r, S) + " on this rank differs from rank " + std::to_string(r) + "'s update " + when +
         ": every rank must end with every rank's updated block (all-gather)");
  }
  if (std::abs(norm - want_norm) > 1e-5 * want_norm) {
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "ShardedStep returned %.6g, but the norm of the averaged gradient before clipping is %.6g: return "
                  "what opt.ClipGradShard returns",
                  norm, want_norm);
    Fail(buf);
  }
}

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
