// What a run trains: a model, its training and evaluation examples, and how a batch of example
// indices becomes a loss. The Trainer (the loop, ranks, stages, snapshots, logs) is the same for
// every task; the stages never see which one it is. Two implement it: BERT on a GLUE task
// (bert_glue_task.cc, --model_type=bert, the default) and a ViT on CIFAR-10 (vit_cifar_task.cc,
// --model_type=vit --task_name=cifar10).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/nn/module.h>

#include "common/model/parallel_ops.h"
#include "common/model/unit_hooks.h"
#include "common/model/units_batch.h"
#include "common/train/train_options.h"

namespace distlm::train {

class ModelTask {
 public:
  virtual ~ModelTask() = default;

  // The model: its parameters (in registration order), train()/eval(), to(device).
  virtual torch::nn::Module& module() = 0;
  // A stable fingerprint of the architecture: ranks and snapshots must agree on it.
  virtual std::string Fingerprint() const = 0;

  virtual int64_t train_size() const = 0;
  virtual int64_t dev_size() const = 0;

  struct Output {
    torch::Tensor loss;    // mean over the batch
    torch::Tensor logits;  // [batch, classes]
    torch::Tensor labels;  // [batch]
  };
  // The forward pass over the examples at `indices` of the training split (train: augmentation,
  // where the task has any, drawn from (seed, epoch, index)) or of the dev split, on `device`.
  // The caller sets autocast and grad mode.
  virtual Output Forward(const std::vector<int64_t>& indices, bool train, int64_t epoch,
                         const torch::Device& device) = 0;

  // The evaluation metrics beyond loss and accuracy, from every dev prediction: written into
  // eval_results.json beside them, and printed as "name value" pairs after the accuracy.
  virtual nlohmann::json Metrics(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels) const = 0;

  // The trained model in the HuggingFace layout (rank 0, after training).
  virtual void Save(const std::string& dir) = 0;

  // The units the model's forward runs in turn (model/unit_hooks.h), and the hooks it runs
  // them through from now on (null: none; the caller keeps them alive): what a stage that
  // shards or cuts the model by units builds on.
  virtual std::vector<model::Unit> Units() = 0;
  virtual void SetUnitHooks(const model::UnitHooks* hooks) = 0;

  // Task 7b: the training examples at `indices` (epoch's augmentation) as a pipeline runs
  // them, cut into `parts` micro-batches, on `device`; the batch is made as Forward makes it (the
  // same padding), then cut. A UserError where the model has no such cut or parts does not divide
  // the batch.
  virtual model::UnitsBatch BatchForUnits(const std::vector<int64_t>& indices, int parts, int64_t epoch,
                                          const torch::Device& device) = 0;

  // Task 7a: the encoder's matrix products split over ops's ranks (ops outlives the split), or,
  // with null, put back whole (a collective). A UserError where the model has no such split or
  // its sizes do not divide by the ranks.
  virtual void SetTensorParallel(const model::ParallelOps* ops) = 0;
};

// The task the options name (--model_type, --task_name, --model_name_or_path, --data_dir, ...),
// its data read and its model built or loaded under the current seed. `log`: print the load
// report (rank 0). Throws UserError naming the flag for anything that does not fit.
std::unique_ptr<ModelTask> MakeModelTask(const TrainOptions& options, bool log);

// The two implementations (bert_glue_task.cc, vit_cifar_task.cc); MakeModelTask picks one.
std::unique_ptr<ModelTask> MakeBertGlueTask(const TrainOptions& options, bool log);
std::unique_ptr<ModelTask> MakeVitCifarTask(const TrainOptions& options, bool log);

// What both tasks do with a model config: --hidden_dropout_prob and
// --attention_probs_dropout_prob, where given (>= 0), replace the config's.
template <typename Config>
Config WithDropoutFlags(Config config, const TrainOptions& options) {
  if (options.hidden_dropout_prob >= 0) config.hidden_dropout_prob = options.hidden_dropout_prob;
  if (options.attention_probs_dropout_prob >= 0) config.attention_probs_dropout_prob = options.attention_probs_dropout_prob;
  return config;
}

// A model built from `config` carrying `loaded`'s weights: dropout has no parameters, so a
// loaded model takes other probabilities by being rebuilt (the new model's own initialisation
// draws from the generator before it is overwritten).
template <typename Model, typename Config>
Model RebuiltWithWeights(const Config& config, Model& loaded) {
  Model rebuilt(config);
  torch::NoGradGuard no_grad;
  auto src = loaded->named_parameters();
  for (auto& p : rebuilt->named_parameters()) p.value().copy_(*src.find(p.key()));
  return rebuilt;
}

}  // namespace distlm::train
