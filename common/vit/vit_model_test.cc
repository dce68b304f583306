// The ViT model without transformers: config parsing and its one-line errors, shapes, the
// checkpoint round trip, and a head of another size replaced on load.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "common/runtime/errors.h"
#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/vit/vit_checkpoint.h"

namespace distlm::vit {
namespace {

std::string ParseError(const std::string& text) {
  try {
    ParseViTConfig(text, "cfg.json");
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(ViTConfigTest, ReadsTransformersFieldsAndNamesWhatIsWrong) {
  ViTConfig c = ParseViTConfig(TinyViTConfig().ToJson(), "cfg.json");
  EXPECT_EQ(c.image_size, 32);
  EXPECT_EQ(c.patch_size, 8);
  EXPECT_EQ(c.num_tokens(), 17);
  EXPECT_EQ(c.num_labels, 10);  // from id2label: ToJson writes no num_labels, as transformers
  EXPECT_EQ(ParseError(R"({"model_type": "bert"})"), R"(cfg.json: model_type is "bert"; a ViT checkpoint says "vit")");
  EXPECT_EQ(ParseError(R"({"model_type": "vit", "image_size": 32})"), R"(cfg.json: missing field "patch_size")");
  EXPECT_EQ(ParseError(R"({"model_type": "vit", "image_size": 30, "patch_size": 8, "hidden_size": 64,
                          "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8})"),
            "cfg.json: image_size 30 is not a multiple of patch_size 8");
  EXPECT_EQ(ParseError(R"({"model_type": "vit", "image_size": 32, "patch_size": 8, "hidden_size": 63,
                          "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8})"),
            "cfg.json: hidden_size 63 is not a multiple of num_attention_heads 2");
  EXPECT_EQ(ParseError("{"), "cfg.json: not valid JSON (byte 2)");  // nlohmann counts the end
}

TEST(ViTModelTest, ShapesAndHuggingFaceNames) {
  torch::manual_seed(0);
  ViTForImageClassification model(TinyViTConfig());
  auto out = model(torch::randn({3, 3, 32, 32}), torch::tensor({1, 2, 3}));
  EXPECT_EQ(out.logits.sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(out.loss.dim(), 0);
  std::set<std::string> names;
  for (const auto& p : model->named_parameters()) names.insert(p.key());
  for (const char* n : {"vit.embeddings.cls_token", "vit.embeddings.position_embeddings",
                        "vit.embeddings.patch_embeddings.projection.weight",
                        "vit.encoder.layer.0.attention.attention.query.weight",
                        "vit.encoder.layer.1.attention.output.dense.bias", "vit.encoder.layer.0.intermediate.dense.weight",
                        "vit.encoder.layer.0.output.dense.weight", "vit.encoder.layer.0.layernorm_before.weight",
                        "vit.encoder.layer.0.layernorm_after.bias", "vit.layernorm.weight", "classifier.weight"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
  EXPECT_EQ(names.size(), 4u + 2 * 16 + 2 + 2);  // embeddings, 16 per layer, final norm, head
  try {
    model(torch::randn({1, 3, 16, 16}));
    FAIL() << "a 16x16 image was accepted";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), "pixel_values has shape [1, 3, 16, 16]; this ViT takes [batch, 3, 32, 32]");
  }
}

// The units task 6 shards by: the embeddings, each layer, the head (final LayerNorm and
// classifier), every parameter in one; hooks run around each in order, and hooks that hand the
// output back change no number.
TEST(ViTModelTest, UnitsAndTheirHooks) {
  torch::manual_seed(0);
  ViTForImageClassification model(TinyViTConfig());
  model->eval();
  const auto units = model->Units();
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(units[0].name, "embeddings");
  EXPECT_EQ(units[3].name, "head");
  EXPECT_EQ(units[3].parameters, (std::vector<std::string>{"vit.layernorm.weight", "vit.layernorm.bias",
                                                           "classifier.weight", "classifier.bias"}));
  size_t total = 0;
  for (const auto& u : units) total += u.parameters.size();
  EXPECT_EQ(total, model->named_parameters().size());

  const torch::Tensor pixels = torch::randn({2, 3, 32, 32});
  const torch::Tensor plain = model(pixels).logits;
  std::vector<std::string> events;
  model::UnitHooks hooks;
  hooks.before_forward = [&](int u) { events.push_back("before " + std::to_string(u)); };
  hooks.after_forward = [&](int u, torch::Tensor out) {
    events.push_back("after " + std::to_string(u));
    return out;
  };
  model->set_unit_hooks(&hooks);
  EXPECT_TRUE(torch::equal(model(pixels).logits, plain));
  EXPECT_EQ(events, (std::vector<std::string>{"before 0", "after 0", "before 1", "after 1", "before 2", "after 2",
                                              "before 3", "after 3"}));
  // What a hook hands back is what the model goes on with.
  hooks.after_forward = [](int u, torch::Tensor out) { return u == 3 ? torch::zeros_like(out) : out; };
  EXPECT_EQ(model(pixels).logits.abs().sum().item<double>(), 0.0);
  model->set_unit_hooks(nullptr);
  EXPECT_TRUE(torch::equal(model(pixels).logits, plain));
}

TEST(ViTCheckpointTest, RoundTripAndANewHeadForAnotherNumberOfClasses) {
  const std::string dir = distlm::testing::MakeTempDir("vit_ckpt");
  torch::manual_seed(0);
  ViTForImageClassification model(TinyViTConfig());
  model->eval();
  SavePretrainedViT(dir, model);
  torch::Tensor x = torch::randn({2, 3, 32, 32});
  torch::Tensor before = model(x).logits;

  PretrainedViT same = LoadPretrainedViT(dir, -1, false);
  same.model->eval();
  EXPECT_TRUE(same.report.unused.empty() && same.report.newly_initialized.empty() && same.report.replaced_head.empty());
  EXPECT_TRUE(torch::equal(same.model(x).logits, before));

  PretrainedViT five = LoadPretrainedViT(dir, 5, false);
  EXPECT_EQ(five.report.replaced_head,
            (std::vector<std::string>{"classifier.bias [10] -> [5]", "classifier.weight [10, 64] -> [5, 64]"}));
  EXPECT_EQ(five.report.newly_initialized, (std::vector<std::string>{"classifier.bias", "classifier.weight"}));
  EXPECT_TRUE(torch::equal(five.model->vit->layernorm->weight, model->vit->layernorm->weight));

  // A bare ViTModel's names (no "vit." prefix) load too; its pooler is reported unused.
  std::vector<std::pair<std::string, torch::Tensor>> bare;
  for (const auto& p : model->vit->named_parameters()) bare.emplace_back(p.key(), p.value().detach());
  bare.emplace_back("pooler.dense.bias", torch::zeros({64}));
  ViTForImageClassification other(TinyViTConfig());
  auto report = LoadViTStateDict(other, bare, "bare.safetensors");
  EXPECT_EQ(report.unused, (std::vector<std::string>{"pooler.dense.bias"}));
  EXPECT_EQ(report.newly_initialized, (std::vector<std::string>{"classifier.bias", "classifier.weight"}));

  bare[0].second = torch::zeros({1, 1, 32});
  try {
    LoadViTStateDict(other, bare, "bare.safetensors");
    FAIL() << "a wrong shape was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("bare.safetensors: tensor " + bare[0].first + " has shape [1, 1, 32]"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace distlm::vit
