// BERT for sequence classification as torch::nn modules.
//
// Module and parameter names are exactly HuggingFace's (bert.encoder.layer.0.attention.self.
// query.weight, ...), so a state dict maps one to one onto a HuggingFace checkpoint. The maths
// follows pytorch_transformers 1.2: additive attention mask (1 - mask) * -10000, exact (erf)
// GELU, LayerNorm eps from the config, tanh pooler on [CLS], dropout from the config.
#pragma once

#include <vector>

#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/container/modulelist.h>

#include "common/bert/bert_config.h"
#include "common/model/parallel_ops.h"
#include "common/model/transformer_layer.h"
#include "common/model/unit_hooks.h"
#include "common/model/units_batch.h"

namespace distlm::bert {

class BertEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit BertEmbeddingsImpl(const BertConfig& config);
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids);

  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr},
      token_type_embeddings{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // HuggingFace's name
  double dropout_p;
};
TORCH_MODULE(BertEmbeddings);

// The encoder layers are model::TransformerLayer in its post-norm layout (HuggingFace's BertLayer
// names): common/model/transformer_layer.h.

class BertPoolerImpl : public torch::nn::Module {
 public:
  explicit BertPoolerImpl(const BertConfig& config);
  torch::Tensor forward(const torch::Tensor& sequence_output);

  torch::nn::Linear dense{nullptr};
};
TORCH_MODULE(BertPooler);

struct BertOutputs {
  torch::Tensor sequence_output;  // [batch, seq, hidden]
  torch::Tensor pooled_output;    // [batch, hidden]
};

class BertModelImpl : public torch::nn::Module {
 public:
  explicit BertModelImpl(const BertConfig& config);
  // attention_mask: 1 for tokens, 0 for padding ([batch, seq], any integer or float dtype).
  BertOutputs forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                      const torch::Tensor& attention_mask);
  // The embeddings and the encoder layers (units 0 to num_hidden_layers, each run through
  // `hooks`; null: none): the sequence output.
  torch::Tensor Encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                       const torch::Tensor& attention_mask, const model::UnitHooks* hooks = nullptr);
  // Units [first, last] of those (0 the embeddings, u the layer u - 1) on `hidden`, the output
  // of unit first - 1 (unused when first is 0).
  torch::Tensor EncodeUnits(int first, int last, torch::Tensor hidden, const torch::Tensor& input_ids,
                            const torch::Tensor& token_type_ids, const torch::Tensor& attention_mask,
                            const model::UnitHooks* hooks);

  BertEmbeddings embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};  // model::TransformerLayer, registered as encoder.layer
  BertPooler pooler{nullptr};
};
TORCH_MODULE(BertModel);

struct ClassifierOutputs {
  torch::Tensor logits;           // [batch, num_labels]
  torch::Tensor loss;             // mean cross-entropy; undefined without labels
  torch::Tensor pooled_output;
  torch::Tensor sequence_output;
};

class BertForSequenceClassificationImpl : public torch::nn::Module {
 public:
  explicit BertForSequenceClassificationImpl(const BertConfig& config);
  ClassifierOutputs forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                            const torch::Tensor& attention_mask,
                            const torch::Tensor& labels = torch::Tensor());

  // Fresh weights as the reference initialises them: Linear and Embedding weights from
  // N(0, initializer_range), LayerNorm weight 1 and bias 0, Linear biases 0. Uses LibTorch's
  // global generator: seed it (torch::manual_seed) first for a reproducible model.
  void InitWeights();
  // Re-initialises only the classifier head (a checkpoint without one).
  void InitClassifier();

  // The units forward runs in turn (model/unit_hooks.h): the embeddings, each encoder layer,
  // then the head (pooler and classifier). `hooks` (null: none) wraps each from then on; the
  // caller keeps them alive.
  std::vector<model::Unit> Units();
  void set_unit_hooks(const model::UnitHooks* hooks) { hooks_ = hooks; }

  const BertConfig& config() const { return config_; }

  // Task 7b: units [first, last] of forward alone (model/unit_hooks.h's numbering: 0 the
  // embeddings, 1..L the encoder layers, L + 1 the head), on `hidden`, the output of unit
  // first - 1 (unused when first is 0): what one pipeline stage computes. Returns unit last's
  // output (the logits when it is the head). std::invalid_argument for a range outside [0, L + 1].
  torch::Tensor ForwardUnits(int first, int last, const torch::Tensor& hidden, const torch::Tensor& input_ids,
                             const torch::Tensor& token_type_ids, const torch::Tensor& attention_mask);
  // The batch cut into `parts` micro-batches of equal size along the batch, each run through
  // ForwardUnits, the head's output turned into the micro-batch's mean cross-entropy (as forward
  // computes the loss). std::invalid_argument when parts does not divide the batch.
  model::UnitsBatch BatchForUnits(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                  const torch::Tensor& attention_mask, const torch::Tensor& labels, int parts);

  // Task 7a: every encoder layer's matrix products split over ops->world() ranks, this rank
  // ops->rank() (Megatron-LM's layout): query, key and value keep this rank's heads' rows, the
  // attention's output projection its columns; the intermediate linear this rank's rows, the
  // output linear its columns. Parameters keep their names and change shape in place (cut from
  // the whole weights every rank loaded); embeddings, LayerNorms, pooler and classifier stay
  // whole. `ops` outlives its use. std::invalid_argument when heads or the intermediate size do
  // not divide by the number of ranks; std::logic_error when the model is cut already.
  void ShardForTensorParallel(const model::ParallelOps* ops);
  // The inverse (a collective: every rank calls it): every cut weight gathered whole through
  // the ops' GatherBlocks, all heads this module's again, no ops. Nothing when not cut.
  void UnshardTensorParallel();
  bool tensor_parallel() const { return tp_ != nullptr; }

  BertModel bert{nullptr};
  torch::nn::Linear classifier{nullptr};

 private:
  // The head (pooler, dropout, classifier) as unit L + 1: the logits; the pooled output into
  // *pooled when not null.
  torch::Tensor Head(const torch::Tensor& sequence_output, torch::Tensor* pooled);
  torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& labels) const;

  BertConfig config_;
  const model::UnitHooks* hooks_ = nullptr;
  const model::ParallelOps* tp_ = nullptr;  // set while the encoder is cut
};
TORCH_MODULE(BertForSequenceClassification);

}  // namespace distlm::bert
