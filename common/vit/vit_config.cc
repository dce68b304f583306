#include "common/vit/vit_config.h"

#include <nlohmann/json.hpp>

#include "common/runtime/atomic_file.h"
#include "common/runtime/config_json.h"
#include "common/runtime/errors.h"

namespace distlm::vit {
namespace {

using nlohmann::json;

}  // namespace

void ViTConfig::Validate(const std::string& source) const {
  auto positive = [&](int64_t v, const char* name) {
    if (v <= 0) throw UserError(source + ": \"" + name + "\" must be positive, got " + std::to_string(v));
  };
  positive(image_size, "image_size");
  positive(patch_size, "patch_size");
  positive(num_channels, "num_channels");
  positive(hidden_size, "hidden_size");
  positive(num_hidden_layers, "num_hidden_layers");
  positive(num_attention_heads, "num_attention_heads");
  positive(intermediate_size, "intermediate_size");
  positive(num_labels, "num_labels");
  if (image_size % patch_size != 0) {
    throw UserError(source + ": image_size " + std::to_string(image_size) + " is not a multiple of patch_size " +
                    std::to_string(patch_size));
  }
  if (hidden_size % num_attention_heads != 0) {
    throw UserError(source + ": hidden_size " + std::to_string(hidden_size) + " is not a multiple of num_attention_heads " +
                    std::to_string(num_attention_heads));
  }
  if (hidden_act != "gelu" && hidden_act != "gelu_new" && hidden_act != "relu") {
    throw UserError(source + ": hidden_act \"" + hidden_act + "\" is not supported (gelu, gelu_new or relu)");
  }
  for (double p : {hidden_dropout_prob, attention_probs_dropout_prob}) {
    if (!(p >= 0 && p < 1)) throw UserError(source + ": a dropout probability must be in [0, 1), got " + std::to_string(p));
  }
  if (!(layer_norm_eps > 0)) throw UserError(source + ": layer_norm_eps must be positive");
}

ViTConfig ParseViTConfig(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw UserError(source + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
  if (!j.is_object()) throw UserError(source + ": expected a JSON object");
  if (!j.contains("model_type") || !j["model_type"].is_string() || j["model_type"] != "vit") {
    throw UserError(source + ": model_type is " + (j.contains("model_type") ? j["model_type"].dump() : "missing") +
                    "; a ViT checkpoint says \"vit\"");
  }
  ViTConfig c;
  c.image_size = ConfigInt(j, "image_size", source, true, 0);
  c.patch_size = ConfigInt(j, "patch_size", source, true, 0);
  c.num_channels = ConfigInt(j, "num_channels", source, false, c.num_channels);
  c.hidden_size = ConfigInt(j, "hidden_size", source, true, 0);
  c.num_hidden_layers = ConfigInt(j, "num_hidden_layers", source, true, 0);
  c.num_attention_heads = ConfigInt(j, "num_attention_heads", source, true, 0);
  c.intermediate_size = ConfigInt(j, "intermediate_size", source, true, 0);
  c.hidden_dropout_prob = ConfigDouble(j, "hidden_dropout_prob", source, c.hidden_dropout_prob);
  c.attention_probs_dropout_prob = ConfigDouble(j, "attention_probs_dropout_prob", source, c.attention_probs_dropout_prob);
  c.initializer_range = ConfigDouble(j, "initializer_range", source, c.initializer_range);
  c.layer_norm_eps = ConfigDouble(j, "layer_norm_eps", source, c.layer_norm_eps);
  if (j.contains("hidden_act")) {
    if (!j["hidden_act"].is_string()) throw UserError(source + ": \"hidden_act\" must be a string");
    c.hidden_act = j["hidden_act"].get<std::string>();
  }
  if (j.contains("qkv_bias")) {
    if (!j["qkv_bias"].is_boolean()) throw UserError(source + ": \"qkv_bias\" must be true or false");
    c.qkv_bias = j["qkv_bias"].get<bool>();
  }
  if (j.contains("num_labels")) {
    c.num_labels = ConfigInt(j, "num_labels", source, false, c.num_labels);
  } else if (j.contains("id2label") && j["id2label"].is_object()) {
    c.num_labels = static_cast<int64_t>(j["id2label"].size());
  }
  c.Validate(source);
  return c;
}

ViTConfig LoadViTConfig(const std::string& path) {
  if (!PathExists(path)) throw UserError(path + ": file not found");
  return ParseViTConfig(ReadFile(path), path);
}

std::string ViTConfig::ToJson() const {
  json id2label = json::object(), label2id = json::object();
  for (int64_t i = 0; i < num_labels; ++i) {
    id2label[std::to_string(i)] = "LABEL_" + std::to_string(i);
    label2id["LABEL_" + std::to_string(i)] = i;
  }
  json j = {
      {"architectures", {"ViTForImageClassification"}},
      {"model_type", "vit"},
      {"image_size", image_size},
      {"patch_size", patch_size},
      {"num_channels", num_channels},
      {"hidden_size", hidden_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"intermediate_size", intermediate_size},
      {"hidden_act", hidden_act},
      {"hidden_dropout_prob", hidden_dropout_prob},
      {"attention_probs_dropout_prob", attention_probs_dropout_prob},
      {"initializer_range", initializer_range},
      {"layer_norm_eps", layer_norm_eps},
      {"qkv_bias", qkv_bias},
      {"id2label", id2label},
      {"label2id", label2id},
  };
  return j.dump(2) + "\n";
}

ViTConfig TinyViTConfig() {
  ViTConfig c;
  c.image_size = 32;
  c.patch_size = 8;
  c.hidden_size = 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 128;
  c.num_labels = 10;
  return c;
}

ViTConfig ViTBaseConfig(int64_t patch_size) {
  ViTConfig c;  // the defaults are ViT-Base at 224 pixels
  c.patch_size = patch_size;
  c.num_labels = 10;
  return c;
}

}  // namespace distlm::vit
