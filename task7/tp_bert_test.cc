// 7a on BERT: a tiny BERT whose encoder is split over 2 and 4 real ranks
// (BertForSequenceClassification::ShardForTensorParallel with task 7a's f and g) against the
// same BERT whole on every rank, in training mode with dropout on: the loss and logits, and
// every parameter's gradient (a shard's against the matching block of the whole gradient),
// 1e-5 relative. Equal masks need nothing of the ranks but their generators in step: the
// attention dropout of a rank's heads takes the bits of those heads in the whole tensor.
#include <gtest/gtest.h>

#include <string>

#include "common/bert/bert_config.h"
#include "common/bert/bert_model.h"
#include "common/testing/rank_test.h"
#include "task7/tensor_parallel_ops.h"
#include "task7/tp_split_testing.h"

namespace distlm::task7 {
namespace {

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

RANK_CASE(bert) {
  const Batch b = MakeBatch();
  ExpectSplitMatchesWhole(
      env, MakeModel, [&](auto& m) { return m->forward(b.ids, b.types, b.mask, b.labels); }, ShardDim,
      2 * 10);  // 2 layers of q, k, v (weights, biases), attention output, intermediate (2), output
}

TEST(Task7TensorParallelBert, EqualsTheWholeModelWithDropoutOnTwoRanks) { EXPECT_RANKS_PASS("bert", 2); }
TEST(Task7TensorParallelBert, EqualsTheWholeModelWithDropoutOnFourRanks) { EXPECT_RANKS_PASS("bert", 4); }

}  // namespace
}  // namespace distlm::task7
