// Loading and saving BERT models in the HuggingFace layout: a folder with config.json,
// model.safetensors and vocab.txt.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "common/bert/bert_config.h"
#include "common/bert/bert_model.h"

namespace distlm::bert {

// What a load did with the file's tensors.
struct LoadReport {
  std::vector<std::string> unused;             // in the file, not in the model (e.g. cls.* heads)
  std::vector<std::string> newly_initialized;  // in the model, not in the file (e.g. classifier.*)
  std::vector<std::string> renamed;            // "old -> new" for pre-training names
};

// Copies the named tensors into the model's parameters. Accepts HuggingFace names and the
// original pre-training layout: LayerNorm.gamma/beta for weight/bias, names with or without
// the "bert." prefix; cls.* heads are reported unused. Shapes must match exactly: a mismatch is
// a UserError naming the tensor, the expected and the found shape. `source` names the file.
LoadReport LoadStateDict(BertForSequenceClassification& model,
                         const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                         const std::string& source);

struct PretrainedModel {
  BertConfig config;
  BertForSequenceClassification model{nullptr};
  LoadReport report;
  std::string vocab_path;  // dir/vocab.txt
};

// Loads dir/config.json, dir/model.safetensors and checks dir/vocab.txt. num_labels > 0
// overrides the config's (the task decides). Parameters missing from the file keep fresh
// weights from InitWeights() under the current seed. Prints the two report lines (unused,
// newly initialised) to stderr when log is true.
PretrainedModel LoadPretrained(const std::string& dir, int64_t num_labels = -1, bool log = true);

// The two report lines, e.g. "unused tensors in model.safetensors (7): cls.predictions.bias, ...".
std::vector<std::string> DescribeLoadReport(const LoadReport& report, const std::string& source);

// Writes dir/config.json, dir/model.safetensors and dir/vocab.txt (copied from vocab_path), each
// atomically. The result loads with LoadPretrained and with any safetensors reader.
void SavePretrained(const std::string& dir, BertForSequenceClassification& model,
                    const std::string& vocab_path);

}  // namespace distlm::bert
