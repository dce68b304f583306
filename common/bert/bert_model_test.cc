#include "common/bert/bert_model.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>
#include <torch/utils.h>

#include "common/runtime/errors.h"

namespace distlm::bert {
namespace {

BertConfig SmallConfig() {
  BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.intermediate_size = 32;
  c.max_position_embeddings = 20;
  c.hidden_dropout_prob = 0.0;
  c.attention_probs_dropout_prob = 0.0;
  return c;
}

TEST(BertModelTest, ParameterNamesAreHuggingFaces) {
  BertConfig c = SmallConfig();
  c.num_hidden_layers = 1;
  BertForSequenceClassification model(c);
  std::set<std::string> names;
  for (const auto& p : model->named_parameters()) names.insert(p.key());
  // The HuggingFace BertForSequenceClassification state dict for one layer.
  std::set<std::string> expected = {
      "bert.embeddings.word_embeddings.weight",
      "bert.embeddings.position_embeddings.weight",
      "bert.embeddings.token_type_embeddings.weight",
      "bert.embeddings.LayerNorm.weight",
      "bert.embeddings.LayerNorm.bias",
      "bert.encoder.layer.0.attention.self.query.weight",
      "bert.encoder.layer.0.attention.self.query.bias",
      "bert.encoder.layer.0.attention.self.key.weight",
      "bert.encoder.layer.0.attention.self.key.bias",
      "bert.encoder.layer.0.attention.self.value.weight",
      "bert.encoder.layer.0.attention.self.value.bias",
      "bert.encoder.layer.0.attention.output.dense.weight",
      "bert.encoder.layer.0.attention.output.dense.bias",
      "bert.encoder.layer.0.attention.output.LayerNorm.weight",
      "bert.encoder.layer.0.attention.output.LayerNorm.bias",
      "bert.encoder.layer.0.intermediate.dense.weight",
      "bert.encoder.layer.0.intermediate.dense.bias",
      "bert.encoder.layer.0.output.dense.weight",
      "bert.encoder.layer.0.output.dense.bias",
      "bert.encoder.layer.0.output.LayerNorm.weight",
      "bert.encoder.layer.0.output.LayerNorm.bias",
      "bert.pooler.dense.weight",
      "bert.pooler.dense.bias",
      "classifier.weight",
      "classifier.bias",
  };
  EXPECT_EQ(names, expected);
}

TEST(BertModelTest, InitialisationFollowsTheReference) {
  torch::manual_seed(1);
  BertConfig c = SmallConfig();
  c.hidden_size = 64;
  c.vocab_size = 2000;
  c.initializer_range = 0.05;
  BertForSequenceClassification model(c);
  for (const auto& p : model->named_parameters()) {
    const std::string& n = p.key();
    const auto& t = p.value();
    if (n.find("LayerNorm.weight") != std::string::npos) {
      EXPECT_TRUE(torch::all(t == 1).item<bool>()) << n;
    } else if (n.find("bias") != std::string::npos) {
      EXPECT_TRUE(torch::all(t == 0).item<bool>()) << n;
    } else if (t.numel() >= 4096) {
      EXPECT_NEAR(t.std().item<double>(), 0.05, 0.005) << n;
      EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.005) << n;
    }
  }
  // Seeded: the same seed gives the same weights.
  torch::manual_seed(1);
  BertForSequenceClassification again(c);
  auto a = model->named_parameters(), b = again->named_parameters();
  for (const auto& p : a) EXPECT_TRUE(torch::equal(p.value(), *b.find(p.key()))) << p.key();
}

TEST(BertModelTest, PaddingDoesNotChangeTheOutput) {
  // The additive mask must hide padded positions completely: padding a sequence further
  // leaves its logits unchanged (up to float rounding).
  torch::manual_seed(2);
  BertForSequenceClassification model(SmallConfig());
  model->eval();
  auto ids = torch::tensor({{2, 7, 9, 11, 3, 13, 3}}, torch::kLong);
  auto types = torch::tensor({{0, 0, 0, 0, 0, 1, 1}}, torch::kLong);
  auto mask = torch::ones({1, 7}, torch::kLong);
  auto seq = model(ids, types, mask).sequence_output;
  auto pad = [](const torch::Tensor& t, int64_t value) {
    return torch::cat({t, torch::full({1, 5}, value, torch::kLong)}, 1);
  };
  auto padded = model(pad(ids, 0), pad(types, 0), pad(mask, 0)).sequence_output.narrow(1, 0, 7);
  EXPECT_LT((seq - padded).abs().max().item<double>(), 1e-5);
  // And a non-padded extension does change it (the check can fail).
  auto extended = model(pad(ids, 5), pad(types, 1), pad(mask, 1)).sequence_output.narrow(1, 0, 7);
  EXPECT_GT((seq - extended).abs().max().item<double>(), 1e-3);
}

TEST(BertModelTest, IntermediateUsesExactGelu) {
  BertConfig c = SmallConfig();
  BertForSequenceClassification bert(c);
  auto inter = bert->bert->layers[0]->as<model::TransformerLayer>()->intermediate;
  auto x = torch::randn({3, c.hidden_size});
  auto h = inter->dense(x);
  auto expected = h * 0.5 * (1.0 + torch::erf(h / std::sqrt(2.0)));
  EXPECT_LT((inter(x) - expected).abs().max().item<double>(), 1e-6);
}

TEST(BertModelTest, LossIsMeanCrossEntropy) {
  torch::manual_seed(3);
  BertForSequenceClassification model(SmallConfig());
  auto ids = torch::randint(1, 50, {4, 6}, torch::kLong);
  auto types = torch::zeros({4, 6}, torch::kLong);
  auto mask = torch::ones({4, 6}, torch::kLong);
  auto labels = torch::tensor({0, 1, 1, 0}, torch::kLong);
  auto out = model(ids, types, mask, labels);
  auto logp = torch::log_softmax(out.logits, 1);
  double expected = 0;
  for (int i = 0; i < 4; ++i) expected -= logp[i][labels[i].item<int64_t>()].item<double>();
  EXPECT_NEAR(out.loss.item<double>(), expected / 4, 1e-6);
}

TEST(BertModelTest, DropoutActsOnlyInTraining) {
  BertConfig c = SmallConfig();
  c.hidden_dropout_prob = 0.5;
  c.attention_probs_dropout_prob = 0.5;
  torch::manual_seed(4);
  BertForSequenceClassification model(c);
  auto ids = torch::randint(1, 50, {2, 6}, torch::kLong);
  auto types = torch::zeros({2, 6}, torch::kLong);
  auto mask = torch::ones({2, 6}, torch::kLong);
  model->eval();
  auto e1 = model(ids, types, mask).logits, e2 = model(ids, types, mask).logits;
  EXPECT_TRUE(torch::equal(e1, e2));
  model->train();
  auto t1 = model(ids, types, mask).logits, t2 = model(ids, types, mask).logits;
  EXPECT_FALSE(torch::equal(t1, t2));
}

TEST(BertModelTest, PaddingRowGetsNoGradient) {
  torch::manual_seed(5);
  BertForSequenceClassification model(SmallConfig());
  auto ids = torch::tensor({{2, 7, 3, 0, 0}}, torch::kLong);
  auto mask = torch::tensor({{1, 1, 1, 0, 0}}, torch::kLong);
  auto out = model(ids, torch::zeros_like(ids), mask, torch::tensor({1}, torch::kLong));
  out.loss.backward();
  auto g = model->bert->embeddings->word_embeddings->weight.grad();
  EXPECT_EQ(g[0].abs().sum().item<double>(), 0.0);
  EXPECT_GT(g[7].abs().sum().item<double>(), 0.0);
}

TEST(BertConfigTest, ParsesAndValidates) {
  auto c = ParseBertConfig(
      R"({"vocab_size": 99, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
          "intermediate_size": 16, "layer_norm_eps": 1e-5, "hidden_dropout_prob": 0.0})",
      "config.json");
  EXPECT_EQ(c.vocab_size, 99);
  EXPECT_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.hidden_dropout_prob, 0.0);
  EXPECT_EQ(c.attention_probs_dropout_prob, 0.1);  // HuggingFace's default
  auto back = ParseBertConfig(c.ToJson(), "round trip");
  EXPECT_EQ(back.ToJson(), c.ToJson());
  EXPECT_EQ(back.Fingerprint(), c.Fingerprint());

  struct Bad {
    const char* json;
    const char* message;
  };
  const Bad cases[] = {
      {R"({"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16})",
       "config.json: missing field \"vocab_size\""},
      {R"({"vocab_size": -5, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16})",
       "config.json: \"vocab_size\" must be > 0, got -5"},
      {R"({"vocab_size": 5, "hidden_size": 9, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16})",
       "config.json: \"hidden_size\" (9) is not a multiple of \"num_attention_heads\" (2)"},
      {R"({"vocab_size": "many", "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16})",
       "config.json: field \"vocab_size\" must be an integer, got \"many\""},
      {R"({"vocab_size": 5, )", "config.json: not valid JSON"},
      {R"([1, 2])", "config.json: expected a JSON object"},
  };
  for (const auto& bad : cases) {
    try {
      ParseBertConfig(bad.json, "config.json");
      ADD_FAILURE() << "accepted " << bad.json;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(bad.message, 0), 0u) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace distlm::bert

