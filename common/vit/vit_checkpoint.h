// Loading and saving ViT models in the HuggingFace layout: a folder with config.json and
// model.safetensors (ViTForImageClassification, or a bare ViTModel).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "common/vit/vit_config.h"
#include "common/vit/vit_model.h"

namespace distlm::vit {

struct ViTLoadReport {
  std::vector<std::string> unused;             // in the file, not in the model (pooler.*)
  std::vector<std::string> newly_initialized;  // in the model, not taken from the file
  // The checkpoint's head has another number of classes (ImageNet's 1000 against CIFAR-10's
  // 10): "classifier.weight [1000, 768] -> [10, 768]"; the head is drawn afresh.
  std::vector<std::string> replaced_head;
};

// Copies the file's tensors into the model. Names with or without the "vit." prefix; a
// classifier of another shape is replaced (reported), any other shape mismatch is a UserError
// naming the tensor, both shapes and `source`.
ViTLoadReport LoadViTStateDict(ViTForImageClassification& model,
                               const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                               const std::string& source);

struct PretrainedViT {
  ViTConfig config;
  ViTForImageClassification model{nullptr};
  ViTLoadReport report;
};

// Loads dir/config.json and dir/model.safetensors. num_labels > 0 overrides the config's (the
// task decides: 10 for CIFAR-10). Parameters not taken from the file keep InitWeights()'s values
// under the current seed. Prints the report lines to stderr when log is true.
PretrainedViT LoadPretrainedViT(const std::string& dir, int64_t num_labels = -1, bool log = true);

// The report as lines, e.g. "unused tensors in model.safetensors (2): vit.pooler.dense.bias, ...".
std::vector<std::string> DescribeViTLoadReport(const ViTLoadReport& report, const std::string& source);

// Writes dir/config.json and dir/model.safetensors, each atomically; loads with
// LoadPretrainedViT and with transformers' ViTForImageClassification.from_pretrained.
void SavePretrainedViT(const std::string& dir, ViTForImageClassification& model);

}  // namespace distlm::vit
