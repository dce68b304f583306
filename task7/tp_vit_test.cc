// 7a on the ViT: a tiny ViT whose encoder is split over 2 and 4 real ranks
// (ViTForImageClassification::ShardForTensorParallel with task 7a's f and g, the split BERT has)
// against the same ViT whole on every rank, in training mode with dropout on: the loss and
// logits, every parameter's gradient (a shard's against its block of the whole gradient), 1e-5
// relative; put back whole, every weight bit for bit.
#include <gtest/gtest.h>

#include <string>

#include "common/testing/rank_test.h"
#include "common/vit/vit_config.h"
#include "common/vit/vit_model.h"
#include "task7/tensor_parallel_ops.h"
#include "task7/tp_split_testing.h"

namespace distlm::task7 {
namespace {

vit::ViTForImageClassification MakeModel() {
  vit::ViTConfig c = vit::TinyViTConfig();
  c.num_attention_heads = 4;  // so that 4 ranks hold one head each
  c.hidden_dropout_prob = 0.1;
  c.attention_probs_dropout_prob = 0.1;
  torch::manual_seed(11);
  vit::ViTForImageClassification m(c);
  m->train();
  return m;
}

// Which block of the whole parameter a rank's shard is: 0 rows, 1 columns, -1 whole.
int ShardDim(const std::string& name) {
  if (name.find(".attention.attention.") != std::string::npos) return 0;  // query, key, value
  if (name.find(".attention.output.dense.weight") != std::string::npos) return 1;
  if (name.find(".intermediate.dense.") != std::string::npos) return 0;
  if (name.find(".output.dense.weight") != std::string::npos) return 1;  // the MLP's second linear
  return -1;
}

RANK_CASE(vit) {
  torch::manual_seed(3);
  const torch::Tensor pixels = torch::randn({3, 3, 32, 32});
  const torch::Tensor labels = torch::tensor({0, 7, 3}, torch::kLong);
  ExpectSplitMatchesWhole(
      env, MakeModel, [&](auto& m) { return m->forward(pixels, labels); }, ShardDim,
      2 * 10);  // 2 layers of q, k, v (weights, biases), attention output, intermediate (2), output
}

TEST(Task7TensorParallelVit, EqualsTheWholeModelWithDropoutOnTwoRanks) { EXPECT_RANKS_PASS("vit", 2); }
TEST(Task7TensorParallelVit, EqualsTheWholeModelWithDropoutOnFourRanks) { EXPECT_RANKS_PASS("vit", 4); }

// Three heads do not split over 2 ranks: one line naming both numbers, before anything is cut.
TEST(Task7TensorParallelVit, RefusesHeadsThatDoNotDivide) {
  vit::ViTConfig c = vit::TinyViTConfig();
  c.hidden_size = 48;
  c.num_attention_heads = 3;
  vit::ViTForImageClassification m(c);

  class TwoRanks : public model::ParallelOps {
   public:
    torch::Tensor ColumnLinear(const torch::Tensor& x, const torch::Tensor&, const torch::Tensor&) const override {
      return x;
    }
    torch::Tensor RowLinear(const torch::Tensor& x, const torch::Tensor&, const torch::Tensor&) const override {
      return x;
    }
    torch::Tensor GatherBlocks(const torch::Tensor& b, int64_t) const override { return b; }
    int rank() const override { return 0; }
    int world() const override { return 2; }
  } ops;
  try {
    m->ShardForTensorParallel(&ops);
    FAIL() << "a split of 3 heads over 2 ranks was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "tensor parallelism over 2 ranks needs the ViT's heads (3) and intermediate size (128) to "
                           "divide by it");
  }
  EXPECT_FALSE(m->tensor_parallel());
  EXPECT_EQ(m->vit->encoder->layer[0]->as<model::TransformerLayer>()->attention->self->query->weight.size(0), 48);
}

}  // namespace
}  // namespace distlm::task7
