// BERT on a GLUE task (--model_type=bert): the model from --model_name_or_path (or the built-in
// tiny random one), the task's examples tokenized with the model's vocabulary.
#include <torch/nn/module.h>

#include <memory>

#include "common/bert/checkpoint.h"
#include "common/data/batch.h"
#include "common/glue/features.h"
#include "common/glue/metrics.h"
#include "common/glue/processors.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/runtime/runfiles.h"
#include "common/tokenizer/bert_tokenizer.h"
#include "common/train/model_task.h"

namespace distlm::train {
namespace {

constexpr char kBuiltinVocab[] = "common/testdata/vocab.txt";
constexpr char kBuiltinData[] = "common/testdata/rte";

class BertGlueTask : public ModelTask {
 public:
  BertGlueTask(const TrainOptions& options, bool log) : dynamic_padding_(!options.pad_to_max_length) {
    auto processor = glue::MakeProcessor(options.task_name);
    const std::string data_dir = options.data_dir.empty() ? FindRunfile(kBuiltinData) : options.data_dir;
    if (!PathExists(data_dir)) throw UserError("--data_dir=" + data_dir + ": no such directory");
    const auto labels = processor->GetLabels();
    if (options.model_name_or_path.empty()) {
      vocab_path_ = FindRunfile(kBuiltinVocab);
    } else {
      if (!PathExists(options.model_name_or_path)) {
        throw UserError(options.model_name_or_path + ": model directory not found (--model_name_or_path)");
      }
      vocab_path_ = options.model_name_or_path + "/vocab.txt";
    }
    auto tokenizer = tokenizer::BertTokenizer::FromVocabFile(vocab_path_, options.do_lower_case);

    if (options.model_name_or_path.empty()) {
      bert::BertConfig config = bert::TinyBertConfig(static_cast<int64_t>(tokenizer.vocab().size()));
      config.num_labels = static_cast<int64_t>(labels.size());
      model_ = bert::BertForSequenceClassification(WithDropoutFlags(config, options));
    } else {
      auto loaded = bert::LoadPretrained(options.model_name_or_path, static_cast<int64_t>(labels.size()), log);
      if (options.hidden_dropout_prob >= 0 || options.attention_probs_dropout_prob >= 0) {
        model_ = RebuiltWithWeights(WithDropoutFlags(loaded.config, options), loaded.model);
      } else {
        model_ = loaded.model;
      }
    }
    if (options.max_seq_length > model_->config().max_position_embeddings) {
      throw UserError("--max_seq_length=" + std::to_string(options.max_seq_length) +
                      " exceeds the model's max_position_embeddings (" +
                      std::to_string(model_->config().max_position_embeddings) + ")");
    }
    if (options.do_train) {
      train_ = data::ToTensors(glue::ConvertExamplesToFeatures(processor->GetTrainExamples(data_dir), labels,
                                                               options.max_seq_length, tokenizer));
    }
    if (options.do_eval) {
      dev_ = data::ToTensors(glue::ConvertExamplesToFeatures(processor->GetDevExamples(data_dir), labels,
                                                             options.max_seq_length, tokenizer));
    }
  }

  torch::nn::Module& module() override { return *model_; }
  std::string Fingerprint() const override { return model_->config().Fingerprint(); }
  int64_t train_size() const override { return train_.size(); }
  int64_t dev_size() const override { return dev_.size(); }

  Output Forward(const std::vector<int64_t>& indices, bool train, int64_t /*epoch*/, const torch::Device& device) override {
    data::Batch b = data::MakeBatch(train ? train_ : dev_, indices, dynamic_padding_).To(device);
    bert::ClassifierOutputs out = model_(b.input_ids, b.segment_ids, b.input_mask, b.labels);
    return {out.loss, out.logits, b.labels};
  }

  model::UnitsBatch BatchForUnits(const std::vector<int64_t>& indices, int parts, int64_t /*epoch*/,
                                  const torch::Device& device) override {
    data::Batch b = data::MakeBatch(train_, indices, dynamic_padding_).To(device);
    if (parts < 1 || static_cast<int64_t>(indices.size()) % parts != 0) {
      throw UserError(std::to_string(parts) + " micro-batches do not divide the batch of " +
                      std::to_string(indices.size()) + " (--micro_batches, --per_gpu_train_batch_size)");
    }
    return model_->BatchForUnits(b.input_ids, b.segment_ids, b.input_mask, b.labels, parts);
  }

  nlohmann::json Metrics(const std::vector<int64_t>& predictions, const std::vector<int64_t>& labels) const override {
    glue::Metrics m = glue::ComputeMetrics(predictions, labels);
    return {{"f1", m.f1}, {"precision", m.precision}, {"recall", m.recall}, {"mcc", m.mcc}};
  }

  void Save(const std::string& dir) override { bert::SavePretrained(dir, model_, vocab_path_); }
  std::vector<model::Unit> Units() override { return model_->Units(); }
  void SetUnitHooks(const model::UnitHooks* hooks) override { model_->set_unit_hooks(hooks); }
  void SetTensorParallel(const model::ParallelOps* ops) override {
    if (ops == nullptr) return model_->UnshardTensorParallel();
    try {
      model_->ShardForTensorParallel(ops);
    } catch (const std::invalid_argument& e) {
      throw UserError(e.what());
    }
  }

 private:
  bool dynamic_padding_;
  std::string vocab_path_;
  bert::BertForSequenceClassification model_{nullptr};
  data::FeatureTensors train_, dev_;
};

}  // namespace

std::unique_ptr<ModelTask> MakeBertGlueTask(const TrainOptions& options, bool log) {
  return std::make_unique<BertGlueTask>(options, log);
}

std::unique_ptr<ModelTask> MakeModelTask(const TrainOptions& options, bool log) {
  // ValidateTrainOptions admits bert and vit only.
  return options.model_type == "vit" ? MakeVitCifarTask(options, log) : MakeBertGlueTask(options, log);
}

}  // namespace distlm::train
