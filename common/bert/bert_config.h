// BertConfig: the model's hyper-parameters, read from (and written to) HuggingFace's config.json.
#pragma once

#include <string>

namespace distlm::bert {

struct BertConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // "gelu" (exact, erf), "gelu_new" (tanh), "relu"
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  int64_t num_labels = 2;

  // Throws UserError naming `source` and the field when a value is out of range.
  void Validate(const std::string& source) const;

  // config.json text (HuggingFace's field names; readable by transformers).
  std::string ToJson() const;

  // A stable fingerprint of the architecture, for ranks to compare at start.
  std::string Fingerprint() const;
};

// Parses config.json text. Fields the model needs must be present (vocab_size, hidden_size,
// num_hidden_layers, num_attention_heads, intermediate_size); the rest default as in
// HuggingFace. Errors are one line naming `source` and the field.
BertConfig ParseBertConfig(const std::string& json_text, const std::string& source);

// Reads and parses a config.json file.
BertConfig LoadBertConfig(const std::string& path);

// The tiny shape used by tests, the default run and benchmarks: hidden 128, 2 layers, 2 heads,
// intermediate 512.
BertConfig TinyBertConfig(int64_t vocab_size);

// bert-base-cased's shape (the course's real model): the defaults above with its vocabulary of
// 28,996 tokens. 108.3 M parameters with a 2-label head.
BertConfig BertBaseCasedConfig();

}  // namespace distlm::bert
