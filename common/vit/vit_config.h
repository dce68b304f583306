// ViTConfig: a Vision Transformer's hyper-parameters, read from (and written to) HuggingFace's
// config.json for ViTForImageClassification (model_type "vit").
#pragma once

#include <string>

namespace distlm::vit {

struct ViTConfig {
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t num_channels = 3;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // "gelu" (exact, erf), "gelu_new" (tanh), "relu"
  double hidden_dropout_prob = 0.0;  // HuggingFace's ViT defaults: no dropout
  double attention_probs_dropout_prob = 0.0;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  bool qkv_bias = true;
  int64_t num_labels = 2;

  // Patches per image side, and tokens per image ([CLS] + patches).
  int64_t patches_per_side() const { return image_size / patch_size; }
  int64_t num_tokens() const { return 1 + patches_per_side() * patches_per_side(); }

  // Throws UserError naming `source` and the field when a value is out of range.
  void Validate(const std::string& source) const;
  // config.json text (HuggingFace's field names; transformers reads it).
  std::string ToJson() const;
};

// Parses config.json text. image_size, patch_size, hidden_size, num_hidden_layers,
// num_attention_heads and intermediate_size are required; num_labels comes from "num_labels" or
// the size of "id2label". A model_type other than "vit" is refused in one line naming `source`.
ViTConfig ParseViTConfig(const std::string& json_text, const std::string& source);
ViTConfig LoadViTConfig(const std::string& path);

// The tiny shape of tests: 32x32 images in 8x8 patches (17 tokens), hidden 64, 2 layers, 2 heads,
// intermediate 128, 10 labels (CIFAR-10).
ViTConfig TinyViTConfig();

// ViT-Base (hidden 768, 12 layers, 12 heads, intermediate 3072) on 224x224 images in patches of
// `patch_size` (16: google/vit-base-patch16-224, 197 tokens; 32: 50 tokens), with CIFAR-10's
// 10 labels.
ViTConfig ViTBaseConfig(int64_t patch_size);

}  // namespace distlm::vit
