// The shared encoder layer against the definitions written out here head by head in double
// precision (BERT's post-norm layer and the ViT's pre-norm one), its parameter names against
// HuggingFace's, and the split's cut of the weights.
#include "common/model/transformer_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "common/model/parallel_ops.h"
#include "common/model/tensor_parallel_split.h"

namespace distlm::model {
namespace {

TransformerLayerOptions Options(bool pre_norm) {
  TransformerLayerOptions o;
  o.hidden_size = 12;
  o.num_attention_heads = 4;
  o.intermediate_size = 20;
  o.hidden_act = "gelu";
  o.layer_norm_eps = 1e-6;
  o.pre_norm = pre_norm;
  return o;
}

// Every parameter drawn away from its initial value (LayerNorms not 1 and 0).
void Randomise(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.normal_(0.0, 0.5);
}

torch::Tensor D(const torch::Tensor& t) { return t.detach().to(torch::kDouble); }

torch::Tensor Linear(const torch::Tensor& x, const torch::nn::Linear& l) {
  torch::Tensor y = torch::matmul(x, D(l->weight).t());
  return l->bias.defined() ? y + D(l->bias) : y;
}

torch::Tensor Norm(const torch::Tensor& x, const torch::nn::LayerNorm& n, double eps) {
  torch::Tensor mean = x.mean(-1, true), var = (x - mean).pow(2).mean(-1, true);
  return (x - mean) / torch::sqrt(var + eps) * D(n->weight) + D(n->bias);
}

torch::Tensor Gelu(const torch::Tensor& x) { return 0.5 * x * (1.0 + torch::erf(x / std::sqrt(2.0))); }

// Attention written head by head: softmax(q_h k_h^T / sqrt(d) + mask) v_h, concatenated.
torch::Tensor Attention(const torch::Tensor& x, const SelfAttentionImpl& a, const torch::Tensor& mask, int heads) {
  const int64_t d = x.size(-1) / heads;
  torch::Tensor q = Linear(x, a.query), k = Linear(x, a.key), v = Linear(x, a.value);
  std::vector<torch::Tensor> out;
  for (int h = 0; h < heads; ++h) {
    auto qh = q.narrow(-1, h * d, d), kh = k.narrow(-1, h * d, d), vh = v.narrow(-1, h * d, d);
    torch::Tensor s = torch::matmul(qh, kh.transpose(-1, -2)) / std::sqrt(static_cast<double>(d));
    if (mask.defined()) s = s + D(mask).squeeze(1);  // [batch, 1, seq] over query positions
    out.push_back(torch::matmul(torch::softmax(s, -1), vh));
  }
  return torch::cat(out, -1);
}

TEST(TransformerLayerTest, PostNormIsBertsLayer) {
  torch::manual_seed(1);
  TransformerLayerOptions o = Options(false);
  TransformerLayer layer(o);
  Randomise(*layer);
  torch::Tensor x = torch::randn({2, 5, 12});
  torch::Tensor mask = torch::zeros({2, 1, 1, 5});
  mask.index_put_({1, 0, 0, torch::indexing::Slice(3, 5)}, -10000.0);  // example 1 has two pads
  torch::Tensor got = layer(x, mask);

  const auto& att = *layer->attention;
  torch::Tensor h = Norm(Linear(Attention(D(x), *att.self, mask, 4), att.output->dense) + D(x),
                         att.output->LayerNorm, o.layer_norm_eps);
  torch::Tensor ffn = Linear(Gelu(Linear(h, layer->intermediate->dense)), layer->output->dense);
  torch::Tensor want = Norm(ffn + h, layer->output->LayerNorm, o.layer_norm_eps);
  EXPECT_LT((D(got) - want).abs().max().item<double>(), 1e-4);
}

TEST(TransformerLayerTest, PreNormIsTheViTsLayer) {
  torch::manual_seed(2);
  TransformerLayerOptions o = Options(true);
  TransformerLayer layer(o);
  Randomise(*layer);
  torch::Tensor x = torch::randn({2, 4, 12});
  torch::Tensor got = layer(x);

  const auto& att = *layer->attention;
  torch::Tensor h =
      D(x) + Linear(Attention(Norm(D(x), layer->layernorm_before, o.layer_norm_eps), *att.self, {}, 4),
                    att.output->dense);
  torch::Tensor want =
      h + Linear(Gelu(Linear(Norm(h, layer->layernorm_after, o.layer_norm_eps), layer->intermediate->dense)),
                 layer->output->dense);
  EXPECT_LT((D(got) - want).abs().max().item<double>(), 1e-4);
}

std::set<std::string> Names(const torch::nn::Module& m) {
  std::set<std::string> names;
  for (const auto& p : m.named_parameters()) names.insert(p.key());
  return names;
}

TEST(TransformerLayerTest, EachLayoutHasItsFamilysNames) {
  const std::set<std::string> bert = {
      "attention.self.query.weight",         "attention.self.query.bias",      "attention.self.key.weight",
      "attention.self.key.bias",             "attention.self.value.weight",    "attention.self.value.bias",
      "attention.output.dense.weight",       "attention.output.dense.bias",    "attention.output.LayerNorm.weight",
      "attention.output.LayerNorm.bias",     "intermediate.dense.weight",      "intermediate.dense.bias",
      "output.dense.weight",                 "output.dense.bias",              "output.LayerNorm.weight",
      "output.LayerNorm.bias"};
  EXPECT_EQ(Names(*TransformerLayer(Options(false))), bert);
  TransformerLayerOptions vit_options = Options(true);
  vit_options.qkv_bias = false;
  const std::set<std::string> vit = {
      "attention.attention.query.weight", "attention.attention.key.weight", "attention.attention.value.weight",
      "attention.output.dense.weight",    "attention.output.dense.bias",    "intermediate.dense.weight",
      "intermediate.dense.bias",          "output.dense.weight",            "output.dense.bias",
      "layernorm_before.weight",          "layernorm_before.bias",          "layernorm_after.weight",
      "layernorm_after.bias"};
  EXPECT_EQ(Names(*TransformerLayer(vit_options)), vit);
}

// Rank `rank` of `world`, with no peers: enough to cut the weights (its products are never run).
class Rank final : public ParallelOps {
 public:
  Rank(int rank, int world) : rank_(rank), world_(world) {}
  torch::Tensor ColumnLinear(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) const override {
    throw std::logic_error("not run");
  }
  torch::Tensor RowLinear(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&) const override {
    throw std::logic_error("not run");
  }
  torch::Tensor GatherBlocks(const torch::Tensor&, int64_t) const override { throw std::logic_error("not run"); }
  int rank() const override { return rank_; }
  int world() const override { return world_; }

 private:
  int rank_, world_;
};

TEST(TensorParallelSplitTest, EachRankKeepsItsHeadsAndItsBlockOfTheFeedForward) {
  torch::manual_seed(3);
  torch::nn::ModuleList layers;
  layers->push_back(TransformerLayer(Options(false)));
  auto& layer = *layers[0]->as<TransformerLayerImpl>();
  const auto whole = layer.named_parameters().values();
  std::vector<torch::Tensor> before;
  for (const auto& p : whole) before.push_back(p.detach().clone());
  const Rank rank1(1, 2);
  ShardLayers(layers, &rank1, "test model");

  EXPECT_EQ(&layer.ops(), &rank1);
  auto keys = layer.named_parameters().keys();
  auto after = layer.named_parameters().values();
  ASSERT_EQ(after.size(), before.size());
  // Rank 1 of 2: heads 2 and 3 (rows 6..11 of query, key, value; columns 6..11 of the attention
  // output) and the feed-forward's second half (rows 10..19 in, columns 10..19 out).
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& name = keys[i];
    torch::Tensor want = before[i];
    if (name.rfind("attention.self.", 0) == 0) want = before[i].narrow(0, 6, 6);
    if (name == "attention.output.dense.weight") want = before[i].narrow(1, 6, 6);
    if (name.rfind("intermediate.dense.", 0) == 0) want = before[i].narrow(0, 10, 10);
    if (name == "output.dense.weight") want = before[i].narrow(1, 10, 10);
    EXPECT_TRUE(torch::equal(after[i], want)) << name << " holds " << after[i].sizes() << ", not rank 1's block";
  }
}

TEST(TensorParallelSplitTest, AnUnevenSplitIsRefusedAndCutsNothing) {
  torch::nn::ModuleList layers;
  layers->push_back(TransformerLayer(Options(false)));
  const Rank rank0(0, 3);  // 4 heads over 3 ranks
  try {
    ShardLayers(layers, &rank0, "test model");
    FAIL() << "4 heads over 3 ranks was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("test model's heads (4)"), std::string::npos) << e.what();
  }
  auto& layer = *layers[0]->as<TransformerLayerImpl>();
  EXPECT_EQ(layer.attention->self->query->weight.size(0), 12);
  EXPECT_EQ(&layer.ops(), &SingleProcessOps());
}

}  // namespace
}  // namespace distlm::model
