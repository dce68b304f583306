// Task 7a's local test, with real ranks (2 and 4, Gloo over 127.0.0.1): a two-layer MLP,
// y = GELU(x W1^T + b1) W2^T + b2, whose first linear is column-parallel and second
// row-parallel, against the same MLP computed whole on every rank from the same weights. The
// output, the loss, and the gradients of x, of every shard and of b2 must equal the whole
// model's (each shard's gradient the matching block of the whole gradient), 1e-5 relative; the
// communication must be one all-reduce in forward and one in backward, of the sizes f and g
// imply. A wrong result is compared with what the usual mistakes give, to name the mistake.
#include <gtest/gtest.h>

#include <torch/autograd.h>
#include <torch/nn/functional/activation.h>

#include <cstdio>
#include <string>

#include "common/testing/rank_test.h"
#include "task7/tensor_parallel.h"

namespace distlm::task7 {
namespace {

using testing::Fail;

constexpr int64_t kBatch = 3, kSeq = 5, kIn = 8, kHidden = 16;

// The largest |a - b| over the largest |b|, as a percentage for messages.
double Relative(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-12);
  return (a - b).abs().max().item<double>() / scale;
}
std::string Percent(double r) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g %%", 100 * r);
  return buf;
}

struct Whole {
  torch::Tensor x, w1, b1, w2, b2, target;
};

// The same weights and data on every rank (a fixed seed): what the shards are cut from.
Whole MakeWhole() {
  torch::manual_seed(7);
  Whole m;
  m.x = torch::randn({kBatch, kSeq, kIn});
  m.w1 = torch::randn({kHidden, kIn}) * 0.3;
  m.b1 = torch::randn({kHidden}) * 0.1;
  m.w2 = torch::randn({kIn, kHidden}) * 0.3;
  m.b2 = torch::randn({kIn}) * 0.1;
  m.target = torch::randn({kBatch, kSeq, kIn});
  return m;
}

torch::Tensor Gelu(const torch::Tensor& t) { return torch::nn::functional::gelu(t); }
torch::Tensor Loss(const torch::Tensor& y, const torch::Tensor& target) { return (y * target).sum(); }

RANK_CASE(mlp) {
  const Whole m = MakeWhole();
  const int r = env.rank, T = env.world;
  // The whole model, on this rank alone.
  auto x_ref = m.x.clone().requires_grad_(true), w1 = m.w1.clone().requires_grad_(true),
       b1 = m.b1.clone().requires_grad_(true), w2 = m.w2.clone().requires_grad_(true),
       b2 = m.b2.clone().requires_grad_(true);
  const torch::Tensor hidden_ref = Gelu(torch::matmul(x_ref, w1.t()) + b1);
  const torch::Tensor y_ref = torch::matmul(hidden_ref, w2.t()) + b2;
  Loss(y_ref, m.target).backward();

  // The same with this rank's shards.
  auto x = m.x.clone().requires_grad_(true);
  auto w1_r = ShardRows(m.w1, r, T).requires_grad_(true), b1_r = ShardRows(m.b1, r, T).requires_grad_(true);
  auto w2_r = ShardColumns(m.w2, r, T).requires_grad_(true), b2_t = m.b2.clone().requires_grad_(true);
  env.counting->TakeStats();
  const torch::Tensor hidden_r = Gelu(ColumnParallelLinear(x, w1_r, b1_r, env.pg));
  const torch::Tensor y = RowParallelLinear(hidden_r, w2_r, b2_t, env.pg);
  const dist::CommStats forward = env.counting->TakeStats();

  const torch::Tensor partial = torch::matmul(hidden_ref.detach().narrow(-1, r * kHidden / T, kHidden / T),
                                              ShardColumns(m.w2, r, T).t());
  if (Relative(y.detach(), y_ref.detach()) > 1e-5) {
    const double d = Relative(y.detach(), y_ref.detach());
    if (Relative(y.detach(), partial + m.b2) < 1e-5) {
      Fail("RowParallelLinear's output is this rank's partial product plus the bias (differs from the whole "
           "model's by " + Percent(d) + "): the partial products were not summed over the ranks in forward (g)");
    }
    if (Relative(y.detach(), y_ref.detach() + (T - 1) * m.b2) < 1e-5) {
      Fail("RowParallelLinear's output has the bias " + std::to_string(T) +
           " times: it was added to every rank's partial product before the sum; add it once, after");
    }
    Fail("the MLP's output differs from the whole model's by " + Percent(d));
  }
  if (forward.calls() != 1 || forward.records[0].op != "allreduce" ||
      forward.records[0].numel() != kBatch * kSeq * kIn) {
    Fail("forward should make exactly one all-reduce, of the row-parallel layer's output (" +
         std::to_string(kBatch * kSeq * kIn) + " elements); it made " + forward.ToJson().dump());
  }

  Loss(y, m.target).backward();
  const dist::CommStats backward = env.counting->TakeStats();
  if (!x.grad().defined()) Fail("x received no gradient: the graph through f is cut");
  if (Relative(x.grad(), x_ref.grad()) > 1e-5) {
    // This rank's share of the input gradient: what backward gives without f's all-reduce.
    auto x_alone = m.x.clone().requires_grad_(true);
    const torch::Tensor h_alone = Gelu(torch::matmul(x_alone, ShardRows(m.w1, r, T).t()) + ShardRows(m.b1, r, T));
    Loss(torch::matmul(h_alone, ShardColumns(m.w2, r, T).t()), m.target).backward();
    const double d = Relative(x.grad(), x_ref.grad());
    if (Relative(x.grad(), x_alone.grad()) < 1e-5) {
      Fail("the backward of CopyToTensorParallel (f) did not all-reduce the input gradient: x.grad on rank " +
           std::to_string(r) + " is this rank's share only, and differs from the whole model's by " + Percent(d));
    }
    // Every rank holds the same gradient of g's output; a backward that sums it over the ranks
    // multiplies it by T, with f's sum or without it.
    if (Relative(x.grad(), T * x_ref.grad()) < 1e-5 || Relative(x.grad(), T * x_alone.grad()) < 1e-5) {
      Fail("x.grad is " + std::to_string(T) + " times the whole model's" +
           (Relative(x.grad(), T * x_ref.grad()) < 1e-5 ? "" : " share of this rank") +
           ": a gradient was summed over the ranks in the backward of ReduceFromTensorParallel (g). Every rank "
           "already holds the whole gradient of g's output (the sum), so g passes it back unchanged");
    }
    Fail("x.grad differs from the whole model's by " + Percent(d));
  }
  const std::pair<const char*, std::pair<torch::Tensor, torch::Tensor>> grads[] = {
      {"W1's rows (column-parallel)", {w1_r.grad(), ShardRows(w1.grad(), r, T)}},
      {"b1's block (column-parallel)", {b1_r.grad(), ShardRows(b1.grad(), r, T)}},
      {"W2's columns (row-parallel)", {w2_r.grad(), ShardColumns(w2.grad(), r, T)}},
      {"b2 (whole, after the sum)", {b2_t.grad(), b2.grad()}}};
  for (const auto& [what, pair] : grads) {
    if (!pair.first.defined()) Fail(std::string("the gradient of ") + what + " is missing");
    if (Relative(pair.first, pair.second) > 1e-5) {
      Fail(std::string("the gradient of ") + what + " on rank " + std::to_string(r) +
           " differs from the matching block of the whole model's by " + Percent(Relative(pair.first, pair.second)));
    }
  }
  if (backward.calls() != 1 || backward.records[0].op != "allreduce" ||
      backward.records[0].numel() != kBatch * kSeq * kIn) {
    Fail("backward should make exactly one all-reduce, of the input gradient at f (" +
         std::to_string(kBatch * kSeq * kIn) + " elements); it made " + backward.ToJson().dump());
  }
}

TEST(Task7TensorParallel, MlpEqualsTheWholeModelOnTwoRanks) { EXPECT_RANKS_PASS("mlp", 2); }
TEST(Task7TensorParallel, MlpEqualsTheWholeModelOnFourRanks) { EXPECT_RANKS_PASS("mlp", 4); }

TEST(Task7TensorParallel, ShardsNameSizesThatDoNotDivide) {
  try {
    ShardRows(torch::zeros({6, 4}), 0, 4);
    FAIL() << "6 rows cut into 4 blocks should be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("size 6 into 4"), std::string::npos) << e.what();
  }
  const auto full = torch::arange(12, torch::kFloat).reshape({3, 4});
  EXPECT_TRUE(torch::equal(ShardColumns(full, 1, 2), full.narrow(1, 2, 2)));
}

}  // namespace
}  // namespace distlm::task7
