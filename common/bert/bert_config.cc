#include "common/bert/bert_config.h"

#include <cstdio>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "common/runtime/atomic_file.h"
#include "common/runtime/config_json.h"
#include "common/runtime/errors.h"

namespace distlm::bert {
namespace {

using nlohmann::json;

}  // namespace

void BertConfig::Validate(const std::string& source) const {
  auto positive = [&](const char* name, int64_t v) {
    if (v <= 0) throw UserError(source + ": \"" + name + "\" must be > 0, got " + std::to_string(v));
  };
  positive("vocab_size", vocab_size);
  positive("hidden_size", hidden_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("intermediate_size", intermediate_size);
  positive("max_position_embeddings", max_position_embeddings);
  positive("type_vocab_size", type_vocab_size);
  positive("num_labels", num_labels);
  if (hidden_size % num_attention_heads != 0) {
    throw UserError(source + ": \"hidden_size\" (" + std::to_string(hidden_size) +
                    ") is not a multiple of \"num_attention_heads\" (" +
                    std::to_string(num_attention_heads) + ")");
  }
  auto probability = [&](const char* name, double p) {
    if (!(p >= 0.0 && p < 1.0)) {
      throw UserError(source + ": \"" + name + "\" must be in [0, 1), got " + std::to_string(p));
    }
  };
  probability("hidden_dropout_prob", hidden_dropout_prob);
  probability("attention_probs_dropout_prob", attention_probs_dropout_prob);
  if (!(initializer_range > 0)) throw UserError(source + ": \"initializer_range\" must be > 0");
  if (!(layer_norm_eps > 0)) throw UserError(source + ": \"layer_norm_eps\" must be > 0");
  static const std::set<std::string> kActs = {"gelu", "gelu_new", "relu"};
  if (kActs.count(hidden_act) == 0) {
    throw UserError(source + ": \"hidden_act\" \"" + hidden_act +
                    "\" is not supported (gelu, gelu_new, relu)");
  }
}

BertConfig ParseBertConfig(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    throw UserError(source + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
  if (!j.is_object()) throw UserError(source + ": expected a JSON object");
  if (j.contains("model_type") && j["model_type"].is_string() && j["model_type"] != "bert") {
    throw UserError(source + ": model_type is \"" + j["model_type"].get<std::string>() +
                    "\"; distlm supports only \"bert\"");
  }
  BertConfig c;
  c.vocab_size = ConfigInt(j, "vocab_size", source, true, 0);
  c.hidden_size = ConfigInt(j, "hidden_size", source, true, 0);
  c.num_hidden_layers = ConfigInt(j, "num_hidden_layers", source, true, 0);
  c.num_attention_heads = ConfigInt(j, "num_attention_heads", source, true, 0);
  c.intermediate_size = ConfigInt(j, "intermediate_size", source, true, 0);
  c.max_position_embeddings = ConfigInt(j, "max_position_embeddings", source, false, c.max_position_embeddings);
  c.type_vocab_size = ConfigInt(j, "type_vocab_size", source, false, c.type_vocab_size);
  c.num_labels = ConfigInt(j, "num_labels", source, false, c.num_labels);
  c.hidden_dropout_prob = ConfigDouble(j, "hidden_dropout_prob", source, c.hidden_dropout_prob);
  c.attention_probs_dropout_prob =
      ConfigDouble(j, "attention_probs_dropout_prob", source, c.attention_probs_dropout_prob);
  c.initializer_range = ConfigDouble(j, "initializer_range", source, c.initializer_range);
  c.layer_norm_eps = ConfigDouble(j, "layer_norm_eps", source, c.layer_norm_eps);
  if (j.contains("hidden_act")) {
    if (!j["hidden_act"].is_string()) throw UserError(source + ": \"hidden_act\" must be a string");
    c.hidden_act = j["hidden_act"].get<std::string>();
  }
  c.Validate(source);
  return c;
}

BertConfig LoadBertConfig(const std::string& path) {
  if (!PathExists(path)) throw UserError(path + ": file not found");
  return ParseBertConfig(ReadFile(path), path);
}

std::string BertConfig::ToJson() const {
  json j = {
      {"architectures", {"BertForSequenceClassification"}},
      {"model_type", "bert"},
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"intermediate_size", intermediate_size},
      {"hidden_act", hidden_act},
      {"hidden_dropout_prob", hidden_dropout_prob},
      {"attention_probs_dropout_prob", attention_probs_dropout_prob},
      {"max_position_embeddings", max_position_embeddings},
      {"type_vocab_size", type_vocab_size},
      {"initializer_range", initializer_range},
      {"layer_norm_eps", layer_norm_eps},
      {"num_labels", num_labels},
  };
  return j.dump(2) + "\n";
}

std::string BertConfig::Fingerprint() const { return StableFingerprint(ToJson()); }

BertConfig TinyBertConfig(int64_t vocab_size) {
  BertConfig c;
  c.vocab_size = vocab_size;
  c.hidden_size = 128;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 512;
  c.max_position_embeddings = 512;
  return c;
}

BertConfig BertBaseCasedConfig() {
  BertConfig c;
  c.vocab_size = 28996;
  return c;
}

}  // namespace distlm::bert
