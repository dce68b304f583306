#include "common/bert/checkpoint.h"

#include <torch/utils.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/safetensors/safetensors.h"

namespace distlm::bert {
namespace {

std::string ShapeString(const torch::IntArrayRef& sizes) {
  std::ostringstream ss;
  ss << "[";
  for (size_t i = 0; i < sizes.size(); ++i) ss << (i ? ", " : "") << sizes[i];
  ss << "]";
  return ss.str();
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// Pre-training checkpoints (the original TensorFlow conversion) call LayerNorm's parameters
// gamma and beta.
std::string ModernName(const std::string& name) {
  if (EndsWith(name, "LayerNorm.gamma")) return name.substr(0, name.size() - 5) + "weight";
  if (EndsWith(name, "LayerNorm.beta")) return name.substr(0, name.size() - 4) + "bias";
  return name;
}

int64_t CountLines(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

}  // namespace

LoadReport LoadStateDict(BertForSequenceClassification& model,
                         const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                         const std::string& source) {
  auto params = model->named_parameters(/*recurse=*/true);
  std::map<std::string, bool> loaded;
  for (const auto& p : params) loaded[p.key()] = false;

  LoadReport report;
  torch::NoGradGuard no_grad;
  for (const auto& [file_name, tensor] : tensors) {
    if (StartsWith(file_name, "cls.")) {
      report.unused.push_back(file_name);
      continue;
    }
    std::string name = ModernName(file_name);
    if (!loaded.count(name) && loaded.count("bert." + name)) name = "bert." + name;
    if (!loaded.count(name)) {
      report.unused.push_back(file_name);
      continue;
    }
    torch::Tensor* target = params.find(name);
    if (name == "bert.embeddings.word_embeddings.weight" && target->size(0) != tensor.size(0)) {
      throw UserError(source + ": tensor '" + file_name + "' has " + std::to_string(tensor.size(0)) +
                      " rows but config.json says vocab_size " + std::to_string(target->size(0)));
    }
    if (target->sizes() != tensor.sizes()) {
      throw UserError(source + ": tensor '" + file_name + "' has shape " + ShapeString(tensor.sizes()) +
                      ", the model expects " + ShapeString(target->sizes()) + " (from config.json)");
    }
    if (!tensor.is_floating_point()) {
      throw UserError(source + ": tensor '" + file_name + "' has dtype " +
                      std::string(c10::toString(tensor.scalar_type())) + ", expected floating point");
    }
    if (loaded[name]) throw UserError(source + ": tensor '" + name + "' appears twice");
    target->copy_(tensor);
    loaded[name] = true;
    if (name != file_name) report.renamed.push_back(file_name + " -> " + name);
  }
  for (const auto& [name, was_loaded] : loaded) {
    if (!was_loaded) report.newly_initialized.push_back(name);
  }
  // Keep the model's own order (named_parameters), which reads better than sorted.
  std::vector<std::string> ordered;
  for (const auto& p : params) {
    if (!loaded[p.key()]) ordered.push_back(p.key());
  }
  report.newly_initialized = ordered;
  if (ordered.size() == params.size()) {
    throw UserError(source + ": none of its " + std::to_string(tensors.size()) +
                    " tensors is a BERT parameter (expected names like "
                    "bert.embeddings.word_embeddings.weight)");
  }
  return report;
}

std::vector<std::string> DescribeLoadReport(const LoadReport& report, const std::string& source) {
  return {
      "unused tensors in " + source + " (" + std::to_string(report.unused.size()) + "): " +
          (report.unused.empty() ? "none" : Join(report.unused)),
      "newly initialised parameters (" + std::to_string(report.newly_initialized.size()) + "): " +
          (report.newly_initialized.empty() ? "none" : Join(report.newly_initialized)),
  };
}

PretrainedModel LoadPretrained(const std::string& dir, int64_t num_labels, bool log) {
  if (!PathExists(dir)) throw UserError(dir + ": model directory not found");
  const std::string config_path = dir + "/config.json";
  const std::string weights_path = dir + "/model.safetensors";
  const std::string vocab_path = dir + "/vocab.txt";
  for (const std::string& p : {config_path, weights_path, vocab_path}) {
    if (!PathExists(p)) {
      throw UserError(p + ": file not found (a model directory holds config.json, "
                          "model.safetensors and vocab.txt)");
    }
  }
  PretrainedModel out;
  out.config = LoadBertConfig(config_path);
  if (num_labels > 0) out.config.num_labels = num_labels;
  int64_t vocab_lines = CountLines(vocab_path);
  if (vocab_lines > out.config.vocab_size) {
    throw UserError(vocab_path + ": has " + std::to_string(vocab_lines) +
                    " tokens but config.json says vocab_size " + std::to_string(out.config.vocab_size));
  }
  out.model = BertForSequenceClassification(out.config);
  auto tensors = safetensors::LoadFile(weights_path, /*to_float32=*/true);
  out.report = LoadStateDict(out.model, tensors, weights_path);
  out.vocab_path = vocab_path;
  if (log) {
    for (const auto& line : DescribeLoadReport(out.report, weights_path)) {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
  return out;
}

void SavePretrained(const std::string& dir, BertForSequenceClassification& model,
                    const std::string& vocab_path) {
  MakeDirs(dir);
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& p : model->named_parameters(/*recurse=*/true)) {
    tensors.emplace_back(p.key(), p.value().detach());
  }
  safetensors::SaveFile(dir + "/model.safetensors", tensors, {{"format", "pt"}});
  WriteFileAtomically(dir + "/config.json", model->config().ToJson());
  WriteFileAtomically(dir + "/vocab.txt", ReadFile(vocab_path));
}

}  // namespace distlm::bert
