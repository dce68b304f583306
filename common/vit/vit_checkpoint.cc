#include "common/vit/vit_checkpoint.h"

#include <torch/utils.h>

#include <cstdio>
#include <map>
#include <set>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/safetensors/safetensors.h"

namespace distlm::vit {
namespace {

std::string Shape(const torch::Tensor& t) { return c10::str(t.sizes()); }

std::string Join(const std::vector<std::string>& names, size_t most = 6) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < most; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > most) s += ", ...";
  return s;
}

}  // namespace

ViTLoadReport LoadViTStateDict(ViTForImageClassification& model,
                               const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                               const std::string& source) {
  std::map<std::string, torch::Tensor> params;
  for (const auto& p : model->named_parameters()) params[p.key()] = p.value();
  ViTLoadReport report;
  std::set<std::string> loaded;
  torch::NoGradGuard no_grad;
  for (const auto& [file_name, tensor] : tensors) {
    std::string name = file_name;
    if (!params.count(name) && params.count("vit." + name)) name = "vit." + name;  // a bare ViTModel
    auto it = params.find(name);
    if (it == params.end()) {
      report.unused.push_back(file_name);
      continue;
    }
    if (!it->second.sizes().equals(tensor.sizes())) {
      if (name.rfind("classifier.", 0) == 0) {
        report.replaced_head.push_back(name + " " + Shape(tensor) + " -> " + Shape(it->second));
        continue;
      }
      throw UserError(source + ": tensor " + file_name + " has shape " + Shape(tensor) + ", the model's " + name +
                      " has " + Shape(it->second));
    }
    it->second.copy_(tensor);
    loaded.insert(name);
  }
  for (const auto& [name, p] : params) {
    if (!loaded.count(name)) report.newly_initialized.push_back(name);
  }
  return report;
}

std::vector<std::string> DescribeViTLoadReport(const ViTLoadReport& r, const std::string& source) {
  std::vector<std::string> lines;
  if (!r.unused.empty()) {
    lines.push_back("unused tensors in " + source + " (" + std::to_string(r.unused.size()) + "): " + Join(r.unused));
  }
  if (!r.replaced_head.empty()) {
    lines.push_back("a new classification head (the checkpoint's has another number of classes): " + Join(r.replaced_head));
  }
  if (!r.newly_initialized.empty()) {
    lines.push_back("newly initialised parameters (" + std::to_string(r.newly_initialized.size()) +
                    "): " + Join(r.newly_initialized));
  }
  return lines;
}

PretrainedViT LoadPretrainedViT(const std::string& dir, int64_t num_labels, bool log) {
  PretrainedViT out;
  out.config = LoadViTConfig(dir + "/config.json");
  if (num_labels > 0) out.config.num_labels = num_labels;
  out.model = ViTForImageClassification(out.config);
  const std::string weights = dir + "/model.safetensors";
  if (!PathExists(weights)) throw UserError(weights + ": file not found (a ViT folder holds config.json and model.safetensors)");
  out.report = LoadViTStateDict(out.model, safetensors::LoadFile(weights), weights);
  if (log) {
    for (const auto& line : DescribeViTLoadReport(out.report, "model.safetensors")) std::fprintf(stderr, "%s\n", line.c_str());
  }
  return out;
}

void SavePretrainedViT(const std::string& dir, ViTForImageClassification& model) {
  MakeDirs(dir);
  WriteFileAtomically(dir + "/config.json", model->config().ToJson());
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& p : model->named_parameters()) tensors.emplace_back(p.key(), p.value().detach());
  safetensors::SaveFile(dir + "/model.safetensors", tensors, {{"format", "pt"}});
}

}  // namespace distlm::vit
