#include "common/bert/bert_model.h"

#include "common/model/dropout.h"
#include "common/model/tensor_parallel_split.h"
#include "common/model/transformer_layer.h"

#include <cmath>
#include <algorithm>
#include <stdexcept>
#include <string>

#include <torch/utils.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/functional.h>

namespace distlm::bert {
namespace {

namespace F = torch::nn::functional;

torch::nn::LayerNorm MakeLayerNorm(const BertConfig& c) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps).elementwise_affine(true));
}

}  // namespace

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& c) : dropout_p(c.hidden_dropout_prob) {
  // padding_idx 0 as in the reference: the [PAD] row gets no gradient.
  word_embeddings = register_module(
      "word_embeddings",
      torch::nn::Embedding(torch::nn::EmbeddingOptions(c.vocab_size, c.hidden_size).padding_idx(0)));
  position_embeddings = register_module(
      "position_embeddings", torch::nn::Embedding(c.max_position_embeddings, c.hidden_size));
  token_type_embeddings =
      register_module("token_type_embeddings", torch::nn::Embedding(c.type_vocab_size, c.hidden_size));
  LayerNorm = register_module("LayerNorm", MakeLayerNorm(c));
}

torch::Tensor BertEmbeddingsImpl::forward(const torch::Tensor& input_ids,
                                          const torch::Tensor& token_type_ids) {
  const int64_t seq = input_ids.size(1);
  auto positions = torch::arange(seq, input_ids.options().dtype(torch::kLong));
  auto x = word_embeddings(input_ids) + position_embeddings(positions).unsqueeze(0) +
           token_type_embeddings(token_type_ids);
  return model::Dropout(LayerNorm(x), dropout_p, is_training());
}

BertPoolerImpl::BertPoolerImpl(const BertConfig& c) {
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.hidden_size));
}

torch::Tensor BertPoolerImpl::forward(const torch::Tensor& sequence_output) {
  // The [CLS] token's final hidden state, through dense + tanh.
  return torch::tanh(dense(sequence_output.select(1, 0)));
}

BertModelImpl::BertModelImpl(const BertConfig& c) {
  embeddings = register_module("embeddings", BertEmbeddings(c));
  auto encoder = register_module("encoder", std::make_shared<torch::nn::Module>("BertEncoder"));
  layers = encoder->register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(model::TransformerLayer(model::LayerOptionsOf(c)));
  pooler = register_module("pooler", BertPooler(c));
}

BertOutputs BertModelImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                   const torch::Tensor& attention_mask) {
  torch::Tensor hidden = Encode(input_ids, token_type_ids, attention_mask);
  return {hidden, pooler(hidden)};
}

torch::Tensor BertModelImpl::Encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                    const torch::Tensor& attention_mask, const model::UnitHooks* hooks) {
  return EncodeUnits(0, static_cast<int>(layers->size()), torch::Tensor(), input_ids, token_type_ids, attention_mask,
                     hooks);
}

torch::Tensor BertModelImpl::EncodeUnits(int first, int last, torch::Tensor hidden, const torch::Tensor& input_ids,
                                         const torch::Tensor& token_type_ids, const torch::Tensor& attention_mask,
                                         const model::UnitHooks* hooks) {
  auto mask = attention_mask.to(torch::kFloat).unsqueeze(1).unsqueeze(2);
  auto additive_mask = (1.0 - mask) * -10000.0;
  for (int u = first; u <= last; ++u) {
    if (u == 0) {
      hidden = model::RunUnit(hooks, 0, [&] { return embeddings(input_ids, token_type_ids); });
    } else {
      const auto& layer = (*layers)[u - 1];
      hidden = model::RunUnit(hooks, u, [&] { return layer->as<model::TransformerLayer>()->forward(hidden, additive_mask); });
    }
  }
  return hidden;
}

BertForSequenceClassificationImpl::BertForSequenceClassificationImpl(const BertConfig& c) : config_(c) {
  bert = register_module("bert", BertModel(c));
  classifier = register_module("classifier", torch::nn::Linear(c.hidden_size, c.num_labels));
  InitWeights();
}

ClassifierOutputs BertForSequenceClassificationImpl::forward(const torch::Tensor& input_ids,
                                                             const torch::Tensor& token_type_ids,
                                                             const torch::Tensor& attention_mask,
                                                             const torch::Tensor& labels) {
  ClassifierOutputs result;
  result.sequence_output = bert->Encode(input_ids, token_type_ids, attention_mask, hooks_);
  result.logits = Head(result.sequence_output, &result.pooled_output);
  if (labels.defined()) result.loss = Loss(result.logits, labels);
  return result;
}

torch::Tensor BertForSequenceClassificationImpl::Loss(const torch::Tensor& logits, const torch::Tensor& labels) const {
  return F::cross_entropy(logits.view({-1, config_.num_labels}), labels.view({-1}));
}

model::UnitsBatch BertForSequenceClassificationImpl::BatchForUnits(const torch::Tensor& input_ids,
                                                                  const torch::Tensor& token_type_ids,
                                                                  const torch::Tensor& attention_mask,
                                                                  const torch::Tensor& labels, int parts) {
  const int64_t b = input_ids.size(0);
  if (parts < 1 || b % parts != 0) {
    throw std::invalid_argument(std::to_string(parts) + " micro-batches do not divide the batch of " +
                                std::to_string(b));
  }
  const int64_t rows = b / parts;
  const int head = static_cast<int>(config_.num_hidden_layers) + 1;
  model::UnitsBatch out;
  out.parts = parts;
  out.activation_shape = {rows, input_ids.size(1), config_.hidden_size};
  // The batch keeps the module alive (a TORCH_MODULE holder owns it through a shared_ptr).
  auto self = std::dynamic_pointer_cast<BertForSequenceClassificationImpl>(shared_from_this());
  out.forward = [self, input_ids, token_type_ids, attention_mask, labels, rows, head](
                    int first, int last, const torch::Tensor& input, int part) {
    auto cut = [&](const torch::Tensor& t) { return t.narrow(0, part * rows, rows); };
    torch::Tensor y = self->ForwardUnits(first, last, input, cut(input_ids), cut(token_type_ids), cut(attention_mask));
    return last == head ? self->Loss(y, cut(labels)) : y;
  };
  return out;
}

torch::Tensor BertForSequenceClassificationImpl::Head(const torch::Tensor& sequence_output, torch::Tensor* pooled) {
  return model::RunUnit(hooks_, static_cast<int>(config_.num_hidden_layers) + 1, [&] {
    torch::Tensor p = bert->pooler(sequence_output);
    if (pooled != nullptr) *pooled = p;
    return classifier(model::Dropout(p, config_.hidden_dropout_prob, is_training()));
  });
}

torch::Tensor BertForSequenceClassificationImpl::ForwardUnits(int first, int last, const torch::Tensor& hidden,
                                                              const torch::Tensor& input_ids,
                                                              const torch::Tensor& token_type_ids,
                                                              const torch::Tensor& attention_mask) {
  const int layers = static_cast<int>(config_.num_hidden_layers);
  if (first < 0 || last > layers + 1 || first > last) {
    throw std::invalid_argument("units " + std::to_string(first) + " to " + std::to_string(last) +
                                " of a BERT with units 0 to " + std::to_string(layers + 1));
  }
  torch::Tensor out = hidden;
  if (first <= layers) {
    out = bert->EncodeUnits(first, std::min(last, layers), out, input_ids, token_type_ids, attention_mask, hooks_);
  }
  return last == layers + 1 ? Head(out, nullptr) : out;
}

void BertForSequenceClassificationImpl::InitWeights() {
  torch::NoGradGuard no_grad;
  const double std = config_.initializer_range;
  // Modules in registration order, so a seed gives the same weights every time.
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* linear = module->as<torch::nn::Linear>()) {
      linear->weight.normal_(0.0, std);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = module->as<torch::nn::Embedding>()) {
      embedding->weight.normal_(0.0, std);
    } else if (auto* norm = module->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
}

void BertForSequenceClassificationImpl::InitClassifier() {
  torch::NoGradGuard no_grad;
  classifier->weight.normal_(0.0, config_.initializer_range);
  classifier->bias.zero_();
}

void BertForSequenceClassificationImpl::ShardForTensorParallel(const model::ParallelOps* ops) {
  if (tp_ != nullptr) throw std::logic_error("ShardForTensorParallel called twice: the weights are cut already");
  model::ShardLayers(bert->layers, ops, "BERT");
  tp_ = ops;
}

void BertForSequenceClassificationImpl::UnshardTensorParallel() {
  if (tp_ == nullptr) return;
  model::UnshardLayers(bert->layers);
  tp_ = nullptr;
}

std::vector<model::Unit> BertForSequenceClassificationImpl::Units() {
  return model::EncoderUnits(*this, "bert.embeddings.", "bert.encoder.layer.", config_.num_hidden_layers,
                             {"bert.pooler.", "classifier."});
}

}  // namespace distlm::bert
