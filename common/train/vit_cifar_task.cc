// A Vision Transformer on CIFAR-10 (--model_type=vit --task_name=cifar10): the model from
// --model_name_or_path (a HuggingFace ViT folder; its head replaced when it has another number
// of classes) or the tiny random one; --data_dir holds CIFAR-10's binary release. Training images
// are augmented (random crop after padding, flip) from (seed, epoch, index), so every stage and
// every rank sees the same pixels for the same example; the dev split is the test batch.
#include <memory>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/config_json.h"
#include "common/runtime/errors.h"
#include "common/train/model_task.h"
#include "common/vision/cifar10.h"
#include "common/vit/vit_checkpoint.h"

namespace distlm::train {
namespace {

using nlohmann::json;

// Normalisation of the checkpoint's preprocessor_config.json (image_mean, image_std) when there
// is one; ViTImageProcessor's defaults (0.5) otherwise.
vision::Preprocess PreprocessFor(const std::string& model_dir, int64_t image_size) {
  vision::Preprocess pre;
  pre.image_size = image_size;
  const std::string path = model_dir + "/preprocessor_config.json";
  if (model_dir.empty() || !PathExists(path)) return pre;
  try {
    json j = json::parse(ReadFile(path));
    if (j.contains("image_mean")) pre.mean = j.at("image_mean").get<std::vector<double>>();
    if (j.contains("image_std")) pre.std = j.at("image_std").get<std::vector<double>>();
  } catch (const json::exception& e) {
    throw UserError(path + ": image_mean and image_std must be lists of 3 numbers");
  }
  if (pre.mean.size() != 3 || pre.std.size() != 3) throw UserError(path + ": image_mean and image_std need 3 values each");
  return pre;
}

class VitCifarTask : public ModelTask {
 public:
  VitCifarTask(const TrainOptions& options, bool log) : seed_(options.seed) {
    if (options.data_dir.empty()) {
      throw UserError("--task_name=cifar10 needs --data_dir: a folder with CIFAR-10's binary files (data_batch_1.bin "
                      ".. data_batch_5.bin, test_batch.bin); bazel run //common/vision:make_sample_cifar10 writes a "
                      "small one");
    }
    const int64_t classes = static_cast<int64_t>(vision::kCifar10Classes.size());
    if (options.model_name_or_path.empty()) {
      vit::ViTConfig config = vit::TinyViTConfig();
      config.num_labels = classes;
      model_ = vit::ViTForImageClassification(WithDropoutFlags(config, options));
    } else {
      if (!PathExists(options.model_name_or_path)) {
        throw UserError(options.model_name_or_path + ": model directory not found (--model_name_or_path)");
      }
      auto loaded = vit::LoadPretrainedViT(options.model_name_or_path, classes, log);
      // Rebuilt even without a dropout flag (BERT skips it then): making it conditional would
      // change the generator's draws, so the ViT runs recorded so far would not replay.
      model_ = RebuiltWithWeights(WithDropoutFlags(loaded.config, options), loaded.model);
    }
    pre_ = PreprocessFor(options.model_name_or_path, model_->config().image_size);
    if (options.do_train) train_ = vision::LoadCifar10(options.data_dir, "train");
    if (options.do_eval) dev_ = vision::LoadCifar10(options.data_dir, "test");
  }

  torch::nn::Module& module() override { return *model_; }

  std::string Fingerprint() const override { return StableFingerprint("vit " + model_->config().ToJson()); }

  int64_t train_size() const override { return train_.labels.defined() ? train_.labels.size(0) : 0; }
  int64_t dev_size() const override { return dev_.labels.defined() ? dev_.labels.size(0) : 0; }

  Output Forward(const std::vector<int64_t>& indices, bool train, int64_t epoch, const torch::Device& device) override {
    const vision::ImageSet& set = train ? train_ : dev_;
    torch::Tensor pixels = vision::MakeBatch(set, indices, pre_, /*augment=*/train, seed_, epoch).to(device);
    torch::Tensor labels = set.labels.index_select(0, torch::tensor(indices, torch::kLong)).to(device);
    vit::ViTOutputs out = model_(pixels, labels);
    return {out.loss, out.logits, labels};
  }

  json Metrics(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels) const override {
    const int64_t classes = static_cast<int64_t>(vision::kCifar10Classes.size());
    vision::ClassificationMetrics m = vision::Classify(torch::tensor(predictions, torch::kLong),
                                                       torch::tensor(labels, torch::kLong), classes);
    json per_class = json::object();
    for (int64_t c = 0; c < classes; ++c) per_class[vision::kCifar10Classes[c]] = m.per_class_accuracy[c];
    return {{"per_class_accuracy", per_class}, {"confusion", m.confusion}};
  }

  void Save(const std::string& dir) override { vit::SavePretrainedViT(dir, model_); }
  std::vector<model::Unit> Units() override { return model_->Units(); }
  void SetUnitHooks(const model::UnitHooks* hooks) override { model_->set_unit_hooks(hooks); }
  // The batch as Forward makes it (augmentation included), then cut (task 7b).
  model::UnitsBatch BatchForUnits(const std::vector<int64_t>& indices, int parts, int64_t epoch,
                                  const torch::Device& device) override {
    if (parts < 1 || static_cast<int64_t>(indices.size()) % parts != 0) {
      throw UserError(std::to_string(parts) + " micro-batches do not divide the batch of " +
                      std::to_string(indices.size()) + " (--micro_batches, --per_gpu_train_batch_size)");
    }
    torch::Tensor pixels = vision::MakeBatch(train_, indices, pre_, /*augment=*/true, seed_, epoch).to(device);
    torch::Tensor labels = train_.labels.index_select(0, torch::tensor(indices, torch::kLong)).to(device);
    return model_->BatchForUnits(pixels, labels, parts);
  }
  void SetTensorParallel(const model::ParallelOps* ops) override {
    if (ops == nullptr) return model_->UnshardTensorParallel();
    try {
      model_->ShardForTensorParallel(ops);
    } catch (const std::invalid_argument& e) {
      throw UserError(e.what());
    }
  }

 private:
  uint64_t seed_;
  vit::ViTForImageClassification model_{nullptr};
  vision::Preprocess pre_;
  vision::ImageSet train_, dev_;
};

}  // namespace

std::unique_ptr<ModelTask> MakeVitCifarTask(const TrainOptions& options, bool log) {
  return std::make_unique<VitCifarTask>(options, log);
}

}  // namespace distlm::train
