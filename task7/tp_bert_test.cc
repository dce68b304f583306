// 7a on BERT: a tiny BERT whose encoder is split over 2 and 4 real ranks
// (BertForSequenceClassification::ShardForTensorParallel with task 7a's f and g) against the
// same BERT whole on every rank, in training mode with dropout on: the loss and logits, and
// every parameter's gradient (a shard's against the matching block of the whole gradient),
// 1e-5 relative. Equal masks need nothing of the ranks but their generators in step: the
// attention dropout of a rank's heads takes the bits of those heads in the whole tensor.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "common/bert/bert_config.h"
#include "common/bert/bert_model.h"
#include "common/testing/rank_test.h"
#include "task7/tensor_parallel_ops.h"

namespace distlm::task7 {
namespace {

using testing::Fail;

constexpr int64_t kVocab = 100, kBatch = 3, kSeq = 12;

bert::BertConfig Config() {
  bert::BertConfig c = bert::TinyBertConfig(kVocab);
  c.num_attention_heads = 4;  // so that 4 ranks hold one head each
  c.hidden_dropout_prob = 0.1;
  c.attention_probs_dropout_prob = 0.1;
  return c;
}

bert::BertForSequenceClassification MakeModel() {
  torch::manual_seed(11);
  bert::BertForSequenceClassification m(Config());
  m->train();
  return m;
}

struct Batch {
  torch::Tensor ids, types, mask, labels;
};

Batch MakeBatch() {
  torch::manual_seed(3);
  Batch b;
  b.ids = torch::randint(1, kVocab, {kBatch, kSeq}, torch::kLong);
  b.types = (torch::arange(kSeq).unsqueeze(0) >= kSeq / 2).to(torch::kLong).expand({kBatch, kSeq}).contiguous();
  b.mask = torch::ones({kBatch, kSeq}, torch::kLong);
  b.mask.narrow(1, kSeq - 3, 3).select(0, 1).zero_();  // the second example padded
  b.labels = torch::tensor({0, 1, 1}, torch::kLong);
  return b;
}

// Which block of the whole parameter a rank's shard is: 0 rows, 1 columns, -1 whole.
int ShardDim(const std::string& name) {
  if (name.find(".attention.self.") != std::string::npos) return 0;
  if (name.find(".attention.output.dense.weight") != std::string::npos) return 1;
  if (name.find(".intermediate.dense.") != std::string::npos) return 0;
  if (name.find(".output.dense.weight") != std::string::npos) return 1;  // the layer's second linear
  return -1;
}

// Relative to the larger of b's scale and 1e-3: the key bias's gradient is zero in exact
// arithmetic (a constant added to every score of a row leaves its softmax unchanged), so both
// models hold rounding noise of about 1e-9 there, which a relative measure alone would magnify.
double Relative(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-3);
}

RANK_CASE(bert) {
  const Batch b = MakeBatch();
  auto whole = MakeModel();
  torch::manual_seed(5);  // the dropout masks
  const auto want = whole->forward(b.ids, b.types, b.mask, b.labels);
  want.loss.backward();

  auto split = MakeModel();
  GroupParallelOps ops(env.pg);
  split->ShardForTensorParallel(&ops);
  torch::manual_seed(5);
  const auto got = split->forward(b.ids, b.types, b.mask, b.labels);
  got.loss.backward();

  char buf[256];
  const double loss_diff = std::abs(got.loss.item<double>() - want.loss.item<double>());
  if (loss_diff > 1e-5 * std::abs(want.loss.item<double>()) || Relative(got.logits, want.logits) > 1e-5) {
    std::snprintf(buf, sizeof(buf), "loss %.7f against the whole model's %.7f (logits differ by %.3g relative)",
                  got.loss.item<double>(), want.loss.item<double>(), Relative(got.logits, want.logits));
    Fail(buf);
  }
  const auto whole_params = whole->named_parameters();
  int shards = 0;
  for (const auto& item : split->named_parameters()) {
    const std::string& name = item.key();
    const torch::Tensor& p = item.value();
    const torch::Tensor full_grad = whole_params[name].grad();
    const int dim = ShardDim(name);
    torch::Tensor block = full_grad;
    if (dim >= 0) {
      const int64_t n = full_grad.size(dim) / env.world;
      block = full_grad.narrow(dim, env.rank * n, n);
      ++shards;
    }
    if (!p.grad().defined() || p.grad().sizes() != block.sizes()) {
      Fail(name + ": no gradient of the shard's shape " + std::string(c10::str(block.sizes())));
    }
    if (Relative(p.grad(), block) > 1e-5) {
      std::snprintf(buf, sizeof(buf), "%s: its gradient differs from the whole model's %s by %.3g relative",
                    name.c_str(), dim < 0 ? "gradient" : "matching block", Relative(p.grad(), block));
      Fail(buf);
    }
  }
  if (shards != 2 * 10) Fail("expected 20 sharded tensors in 2 layers, found " + std::to_string(shards));

  // Put back whole (what evaluation and saving see): every weight the whole model's, bit for
  // bit; cut again, the same forward.
  for (auto& p : split->parameters()) p.mutable_grad() = torch::Tensor();
  split->UnshardTensorParallel();
  if (split->tensor_parallel()) Fail("UnshardTensorParallel left the model split");
  for (const auto& item : split->named_parameters()) {
    if (!torch::equal(item.value(), whole_params[item.key()])) Fail(item.key() + ": not the whole weight once put back");
  }
  split->ShardForTensorParallel(&ops);
  torch::manual_seed(5);
  const auto again = split->forward(b.ids, b.types, b.mask, b.labels);
  if (!torch::equal(again.logits, got.logits)) Fail("cut again, the forward differs from the first cut's");
}

TEST(Task7TensorParallelBert, EqualsTheWholeModelWithDropoutOnTwoRanks) { EXPECT_RANKS_PASS("bert", 2); }
TEST(Task7TensorParallelBert, EqualsTheWholeModelWithDropoutOnFourRanks) { EXPECT_RANKS_PASS("bert", 4); }

}  // namespace
}  // namespace distlm::task7
