// What 7a's model tests (tp_bert_test.cc, tp_vit_test.cc) check of a model split over real
// ranks against the same model whole: its outputs, every parameter's gradient (a shard's against
// the matching block of the whole gradient), and the weights put back whole.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include <torch/torch.h>

#include "common/testing/rank_test.h"
#include "task7/tensor_parallel_ops.h"

namespace distlm::task7 {

// Relative to the larger of b's scale and 1e-3: the key bias's gradient is zero in exact
// arithmetic (a constant added to every score of a row leaves its softmax unchanged), so both
// models hold rounding noise of about 1e-9 there, which a relative measure alone would magnify.
inline double Relative(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-3);
}

// Fails unless the split model's loss and logits are within 1e-5 (relative) of the whole one's.
inline void ExpectSameOutputs(const torch::Tensor& got_loss, const torch::Tensor& want_loss,
                              const torch::Tensor& got_logits, const torch::Tensor& want_logits) {
  const double got = got_loss.item<double>(), want = want_loss.item<double>();
  if (std::abs(got - want) > 1e-5 * std::abs(want) || Relative(got_logits, want_logits) > 1e-5) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "loss %.7f against the whole model's %.7f (logits differ by %.3g relative)", got,
                  want, Relative(got_logits, want_logits));
    testing::Fail(buf);
  }
}

// Fails (testing::Fail, naming the parameter) unless each of `split`'s gradients is within 1e-5
// of its block of `whole`'s: `shard_dim(name)` says which (0 rows, 1 columns, -1 whole) and
// the block is rank's of world. Returns how many parameters were shards.
inline int ExpectShardGradients(const torch::OrderedDict<std::string, torch::Tensor>& whole,
                                const torch::OrderedDict<std::string, torch::Tensor>& split,
                                const std::function<int(const std::string&)>& shard_dim, int rank, int world) {
  int shards = 0;
  char buf[256];
  for (const auto& item : split) {
    const std::string& name = item.key();
    const torch::Tensor& p = item.value();
    const torch::Tensor full_grad = whole[name].grad();
    const int dim = shard_dim(name);
    torch::Tensor block = full_grad;
    if (dim >= 0) {
      const int64_t n = full_grad.size(dim) / world;
      block = full_grad.narrow(dim, rank * n, n);
      ++shards;
    }
    if (!p.grad().defined() || p.grad().sizes() != block.sizes()) {
      testing::Fail(name + ": no gradient of the shard's shape " + std::string(c10::str(block.sizes())));
    }
    if (Relative(p.grad(), block) > 1e-5) {
      std::snprintf(buf, sizeof(buf), "%s: its gradient differs from the whole model's %s by %.3g relative",
                    name.c_str(), dim < 0 ? "gradient" : "matching block", Relative(p.grad(), block));
      testing::Fail(buf);
    }
  }
  return shards;
}

// Fails unless every parameter of `split`, put back whole, equals `whole`'s bit for bit.
inline void ExpectWhole(const torch::OrderedDict<std::string, torch::Tensor>& whole,
                        const torch::OrderedDict<std::string, torch::Tensor>& split) {
  for (const auto& item : split) {
    if (!torch::equal(item.value(), whole[item.key()])) {
      testing::Fail(item.key() + ": not the whole weight once put back");
    }
  }
}

// One training step of `make()`'s model (dropout on) whole, then of another `make()` split over
// env's ranks by ShardForTensorParallel with 7a's f and g, the dropout masks keyed by the same
// seed: the loss and logits, every gradient (ShardDim's block of the whole one), and `cuts`
// tensors cut; then put back whole, every weight bit for bit, and cut again, the same forward.
// `forward(model)` runs the model on the test's batch and returns its outputs (.loss, .logits).
template <typename Make, typename Forward>
void ExpectSplitMatchesWhole(const testing::RankEnv& env, Make make, Forward forward,
                             const std::function<int(const std::string&)>& shard_dim, int cuts) {
  auto whole = make();
  torch::manual_seed(5);  // the dropout masks
  const auto want = forward(whole);
  want.loss.backward();

  auto split = make();
  GroupParallelOps ops(env.pg);
  split->ShardForTensorParallel(&ops);
  torch::manual_seed(5);
  const auto got = forward(split);
  got.loss.backward();

  ExpectSameOutputs(got.loss, want.loss, got.logits, want.logits);
  const auto whole_params = whole->named_parameters();
  const int shards = ExpectShardGradients(whole_params, split->named_parameters(), shard_dim, env.rank, env.world);
  if (shards != cuts) {
    testing::Fail("expected " + std::to_string(cuts) + " sharded tensors, found " + std::to_string(shards));
  }

  for (auto& p : split->parameters()) p.mutable_grad() = torch::Tensor();
  split->UnshardTensorParallel();
  if (split->tensor_parallel()) testing::Fail("UnshardTensorParallel left the model split");
  ExpectWhole(whole_params, split->named_parameters());
  split->ShardForTensorParallel(&ops);
  torch::manual_seed(5);
  const auto again = forward(split);
  if (!torch::equal(again.logits, got.logits)) testing::Fail("cut again, the forward differs from the first cut's");
}

}  // namespace distlm::task7
