// The flat layout against its closed form, and ShardedAdamW on N simulated ranks (the
// collectives done by hand in the test) against train::BertAdamW and train::ClipGradNorm on
// the averaged gradient: the same parameters after several clipped, weight-decayed updates.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <random>

#include "common/train/bert_adamw.h"
#include "common/zero/flat_layout.h"
#include "common/zero/sharded_adamw.h"

namespace distlm::zero {
namespace {

TEST(FlatLayoutTest, OffsetsPaddingAndSegmentsOfASmallCase) {
  FlatLayout l({3, 5, 2}, 4);
  EXPECT_EQ(l.total_numel(), 10);
  EXPECT_EQ(l.shard_numel(), 3);  // ceil(10 / 4)
  EXPECT_EQ(l.padded_numel(), 12);
  EXPECT_EQ(l.padding(), 2);
  EXPECT_EQ(l.offset(0), 0);
  EXPECT_EQ(l.offset(1), 3);
  EXPECT_EQ(l.offset(2), 8);
  auto s1 = l.Segments(1);  // [3, 6): the first three elements of parameter 1
  ASSERT_EQ(s1.size(), 1u);
  EXPECT_EQ(s1[0].param, 1u);
  EXPECT_EQ(s1[0].flat_begin, 3);
  EXPECT_EQ(s1[0].numel, 3);
  EXPECT_EQ(s1[0].param_begin, 0);
  auto s2 = l.Segments(2);  // [6, 9): the last two of parameter 1, the first of parameter 2
  ASSERT_EQ(s2.size(), 2u);
  EXPECT_EQ(s2[0].param, 1u);
  EXPECT_EQ(s2[0].param_begin, 3);
  EXPECT_EQ(s2[0].numel, 2);
  EXPECT_EQ(s2[1].param, 2u);
  EXPECT_EQ(s2[1].flat_begin, 8);
  EXPECT_EQ(s2[1].numel, 1);
  auto s3 = l.Segments(3);  // [9, 12): one real element, two of padding
  ASSERT_EQ(s3.size(), 1u);
  EXPECT_EQ(s3[0].param_begin, 1);
  EXPECT_EQ(l.real_numel(3), 1);
  EXPECT_EQ(l.real_numel(0), 3);
}

TEST(FlatLayoutTest, EveryElementBelongsToExactlyOneRank) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int64_t> numels(1 + rng() % 6);
    int64_t total = 0;
    for (auto& n : numels) total += (n = rng() % 9);  // zero-sized parameters too
    const int world = 1 + static_cast<int>(rng() % 5);
    FlatLayout l(numels, world);
    EXPECT_EQ(l.shard_numel(), (total + world - 1) / world);
    EXPECT_GE(l.padding(), 0);
    EXPECT_LT(l.padding(), world);
    std::vector<int> owners(total, 0);
    int64_t real = 0;
    for (int r = 0; r < world; ++r) {
      real += l.real_numel(r);
      int64_t seen = 0;
      for (const Segment& s : l.Segments(r)) {
        EXPECT_GE(s.flat_begin, l.shard_begin(r));
        EXPECT_LE(s.flat_begin + s.numel, l.shard_begin(r) + l.shard_numel());
        EXPECT_EQ(s.flat_begin, l.offset(s.param) + s.param_begin);
        for (int64_t k = 0; k < s.numel; ++k) ++owners[s.flat_begin + k];
        seen += s.numel;
      }
      EXPECT_EQ(seen, l.real_numel(r));
    }
    EXPECT_EQ(real, total);
    for (int64_t k = 0; k < total; ++k) EXPECT_EQ(owners[k], 1) << "element " << k;
  }
}

std::vector<std::pair<std::string, torch::Tensor>> MakeParams(uint64_t seed) {
  torch::manual_seed(seed);
  // Names decide weight decay: the bias and the LayerNorm weight get none.
  return {{"dense.weight", torch::randn({4, 5}).requires_grad_()},
          {"dense.bias", torch::randn({5}).requires_grad_()},
          {"LayerNorm.weight", torch::randn({7}).requires_grad_()},
          {"out.weight", torch::randn({3, 2}).requires_grad_()}};
}

TEST(ShardedAdamWTest, SimulatedRanksMatchBertAdamWOnTheAverage) {
  constexpr int kRanks = 3;  // 38 elements: shards of 13, one element of padding
  constexpr double kMaxNorm = 0.5;  // small enough that every update clips
  train::AdamWOptions adam;
  adam.lr = 1e-2;
  adam.weight_decay = 0.1;

  auto reference = MakeParams(1);
  train::BertAdamW ref_opt(reference, adam);
  std::vector<std::vector<std::pair<std::string, torch::Tensor>>> copies;
  std::vector<std::unique_ptr<ShardedAdamW>> ranks;
  for (int r = 0; r < kRanks; ++r) {
    copies.push_back(MakeParams(1));
    ranks.push_back(std::make_unique<ShardedAdamW>(copies.back(), adam, r, kRanks));
  }
  const FlatLayout& layout = ranks[0]->layout();
  ASSERT_EQ(layout.total_numel(), 38);
  ASSERT_EQ(layout.shard_numel(), 13);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(ranks[r]->OptimizerStateBytes(), 8 * layout.real_numel(r));
    EXPECT_EQ(ranks[r]->GradShardBytes(), 4 * 13);
  }
  EXPECT_EQ(ref_opt.StateBytes(), 8 * 38);

  torch::NoGradGuard no_grad;
  for (int update = 0; update < 4; ++update) {
    // Each rank's own gradient, written through .grad (a view of the flat gradient).
    std::vector<std::vector<torch::Tensor>> grads(kRanks);
    for (int r = 0; r < kRanks; ++r) {
      for (auto& [name, p] : copies[r]) {
        grads[r].push_back(torch::randn(p.sizes()));
        p.mutable_grad().copy_(grads[r].back());
      }
    }
    // Reference: the average over ranks, clipped by its norm, one step.
    for (size_t i = 0; i < reference.size(); ++i) {
      torch::Tensor sum = grads[0][i].clone();
      for (int r = 1; r < kRanks; ++r) sum.add_(grads[r][i]);
      reference[i].second.mutable_grad() = sum.div_(kRanks);
    }
    std::vector<torch::Tensor> ref_params;
    for (auto& [name, p] : reference) ref_params.push_back(p);
    const double ref_norm = train::ClipGradNorm(ref_params, kMaxNorm);
    ref_opt.Step();
    // Sharded, collectives by hand: reduce-scatter, global norm, step, all-gather.
    torch::Tensor sum = ranks[0]->flat_grad().clone();
    for (int r = 1; r < kRanks; ++r) sum.add_(ranks[r]->flat_grad());
    double squares = 0;
    for (int r = 0; r < kRanks; ++r) {
      ranks[r]->grad_shard().copy_(sum.narrow(0, layout.shard_begin(r), layout.shard_numel())).div_(kRanks);
      squares += ranks[r]->ShardSquaredNorm();
    }
    EXPECT_NEAR(std::sqrt(squares), ref_norm, 1e-5 * ref_norm);
    for (int r = 0; r < kRanks; ++r) {
      ranks[r]->ScaleGradShard(std::sqrt(squares), kMaxNorm);
      ranks[r]->StepShard();
    }
    for (int r = 0; r < kRanks; ++r) {
      for (int src = 0; src < kRanks; ++src) {
        ranks[r]->flat_params().narrow(0, layout.shard_begin(src), layout.shard_numel()).copy_(ranks[src]->param_shard());
      }
      ranks[r]->ZeroGrad();
    }
    for (int r = 0; r < kRanks; ++r) {
      for (size_t i = 0; i < reference.size(); ++i) {
        // The parameters are views of the flat buffer: the all-gather updated them.
        EXPECT_TRUE(torch::allclose(copies[r][i].second, reference[i].second, 1e-5, 1e-7))
            << "rank " << r << " " << reference[i].first << " after update " << update + 1 << "\n"
            << (copies[r][i].second - reference[i].second).abs().max().item<float>();
        EXPECT_EQ(torch::count_nonzero(copies[r][i].second.grad()).item<int64_t>(), 0);
      }
      EXPECT_EQ(ranks[r]->flat_params().narrow(0, 38, 1).item<float>(), 0.0f) << "padding moved";
    }
  }
}

TEST(ShardedAdamWTest, BackwardAccumulatesIntoTheFlatGradient) {
  auto params = MakeParams(2);
  ShardedAdamW opt(params, train::AdamWOptions{}, 0, 2);
  torch::Tensor x = torch::randn({2, 4});
  torch::Tensor loss = x.matmul(params[0].second).add(params[1].second).sum();
  loss.backward();
  // d loss / d bias = batch size, for every element; the view kept its storage.
  EXPECT_TRUE(torch::equal(opt.flat_grad().narrow(0, 20, 5), torch::full({5}, 2.0f)));
  EXPECT_TRUE(params[1].second.grad().is_alias_of(opt.flat_grad()));
}

TEST(ShardedAdamWTest, GradientsSetToNoneAreAdoptedBack) {
  auto params = MakeParams(3);
  ShardedAdamW opt(params, train::AdamWOptions{}, 1, 2);
  opt.flat_grad().fill_(5);  // a stale gradient left in the buffer
  for (auto& [name, p] : params) p.mutable_grad() = torch::Tensor();
  torch::Tensor loss = params[1].second.sum() * 3;  // only dense.bias gets a gradient
  loss.backward();
  EXPECT_FALSE(params[1].second.grad().is_alias_of(opt.flat_grad()));
  opt.AdoptGradients();
  EXPECT_TRUE(torch::equal(opt.flat_grad().narrow(0, 20, 5), torch::full({5}, 3.0f)));
  EXPECT_EQ(opt.flat_grad().narrow(0, 0, 20).abs().sum().item<float>(), 0.0f);  // no gradient: zeros
  EXPECT_EQ(opt.flat_grad().narrow(0, 25, 13).abs().sum().item<float>(), 0.0f);
  for (auto& [name, p] : params) EXPECT_TRUE(p.grad().is_alias_of(opt.flat_grad())) << name;
}

}  // namespace
}  // namespace distlm::zero
