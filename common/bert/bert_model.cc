#include "common/bert/bert_model.h"

#include "common/bert/dropout.h"
#include "common/bert/layer_ops.h"

#include <cmath>
#include <algorithm>
#include <stdexcept>
#include <string>

#include <torch/version.h>
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

// Dropout that costs nothing when p is 0 (the parity configurations) or in eval mode; see
// dropout.h for why it is not torch::dropout.
torch::Tensor MaybeDropout(const torch::Tensor& x, double p, bool training) {
  return Dropout(x, p, training);
}

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
  return MaybeDropout(LayerNorm(x), dropout_p, is_training());
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& c)
    : num_heads(c.num_attention_heads),
      head_size(c.hidden_size / c.num_attention_heads),
      dropout_p(c.attention_probs_dropout_prob) {
  query = register_module("query", torch::nn::Linear(c.hidden_size, c.hidden_size));
  key = register_module("key", torch::nn::Linear(c.hidden_size, c.hidden_size));
  value = register_module("value", torch::nn::Linear(c.hidden_size, c.hidden_size));
}

torch::Tensor BertSelfAttentionImpl::forward(const torch::Tensor& hidden_in,
                                             const torch::Tensor& additive_mask) {
  const int64_t batch = hidden_in.size(0), seq = hidden_in.size(1), heads = num_heads, d = head_size;
  // One product for query, key and value: the three weights side by side (their gradients flow
  // back to the three parameters through the concatenation). Tensor parallel: one
  // column-parallel product of this rank's heads' rows of all three.
  auto w = torch::cat({query->weight, key->weight, value->weight});
  auto b = torch::cat({query->bias, key->bias, value->bias});
  // [batch, seq, 3 * hidden] -> [3, batch * heads, seq, head_size], one copy for all three.
  auto qkv = (tp != nullptr ? tp->ColumnLinear(hidden_in, w, b) : torch::linear(hidden_in, w, b))
                 .view({batch, seq, 3, heads, d})
                 .permute({2, 0, 3, 1, 4})
                 .contiguous()
                 .view({3, batch * heads, seq, d});
  // unbind, not qkv[i]: its backward stacks the three gradients once instead of filling three
  // full-size zero tensors.
  auto parts = qkv.unbind(0);
  auto q = parts[0], k = parts[1], v = parts[2];
#if TORCH_VERSION_MAJOR >= 2
  // LibTorch 2.x: the fused kernel (on CPU, a blocked flash attention with an online softmax:
  // the [seq, seq] scores never exist whole). It draws attention dropout from its own
  // generator, so it serves only where there is none (eval, or attention dropout 0); training
  // with attention dropout keeps the product below and distlm's dropout, which the seed and
  // snapshots decide.
  if (!(is_training() && dropout_p > 0)) {
    auto ctx = at::scaled_dot_product_attention(q.view({batch, heads, seq, d}), k.view({batch, heads, seq, d}),
                                                v.view({batch, heads, seq, d}), additive_mask);
    return ctx.permute({0, 2, 1, 3}).reshape({batch, seq, heads * d});
  }
#endif
  // scores = mask + (q k^T) / sqrt(head_size), in one batched product: the mask row of each
  // example is broadcast over heads and query positions.
  auto mask = additive_mask.expand({batch, heads, 1, seq}).reshape({batch * heads, 1, seq});
  auto scores = torch::baddbmm(mask, q, k.transpose(1, 2), /*beta=*/1.0,
                               /*alpha=*/1.0 / std::sqrt(static_cast<double>(d)));
  auto probs = tp == nullptr ? MaybeDropout(torch::softmax(scores, -1), dropout_p, is_training())
                             : DropoutOfHeads(torch::softmax(scores, -1), dropout_p, is_training(), total_heads,
                                              head_offset, heads);
  // [batch * heads, seq, head_size] -> [batch, seq, hidden]
  return torch::bmm(probs, v).view({batch, heads, seq, d}).permute({0, 2, 1, 3}).reshape({batch, seq, heads * d});
}

BertResidualOutputImpl::BertResidualOutputImpl(int64_t in_features, const BertConfig& c)
    : dropout_p(c.hidden_dropout_prob) {
  dense = register_module("dense", torch::nn::Linear(in_features, c.hidden_size));
  LayerNorm = register_module("LayerNorm", MakeLayerNorm(c));
}

torch::Tensor BertResidualOutputImpl::forward(const torch::Tensor& x, const torch::Tensor& residual) {
  // Row-parallel: the ranks' partial products summed, then the (whole) bias once.
  const torch::Tensor y = tp == nullptr ? ApplyLinear(dense, x) : tp->RowLinear(x, dense->weight, dense->bias);
  return LayerNorm(MaybeDropout(y, dropout_p, is_training()) + residual);
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& c) {
  self = register_module("self", BertSelfAttention(c));
  output = register_module("output", BertResidualOutput(c.hidden_size, c));
}

torch::Tensor BertAttentionImpl::forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask) {
  return output(self(hidden, additive_mask), hidden);
}

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& c) : act(c.hidden_act) {
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.intermediate_size));
}

torch::Tensor BertIntermediateImpl::forward(const torch::Tensor& x) {
  return Activation(act, tp != nullptr ? tp->ColumnLinear(x, dense->weight, dense->bias) : ApplyLinear(dense, x));
}

BertLayerImpl::BertLayerImpl(const BertConfig& c) {
  attention = register_module("attention", BertAttention(c));
  intermediate = register_module("intermediate", BertIntermediate(c));
  output = register_module("output", BertResidualOutput(c.intermediate_size, c));
}

torch::Tensor BertLayerImpl::forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask) {
  auto attended = attention(hidden, additive_mask);
  return output(intermediate(attended), attended);
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
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(BertLayer(c));
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
      hidden = model::RunUnit(hooks, u, [&] { return layer->as<BertLayer>()->forward(hidden, additive_mask); });
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
    return classifier(MaybeDropout(p, config_.hidden_dropout_prob, is_training()));
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

namespace {

// Every encoder layer's cut parameters with the dimension each is cut along: the heads' rows of
// query, key and value (weights and biases), the attention output's columns, the intermediate's
// rows, the output's columns.
template <typename Fn>
void ForEachCut(torch::nn::ModuleList& layers, Fn&& fn) {
  for (const auto& module : *layers) {
    auto* layer = module->as<BertLayer>();
    auto& self = *layer->attention->self;
    for (torch::nn::Linear* l : {&self.query, &self.key, &self.value}) {
      fn((*l)->weight, 0);
      fn((*l)->bias, 0);
    }
    fn(layer->attention->output->dense->weight, 1);
    fn(layer->intermediate->dense->weight, 0);
    fn(layer->intermediate->dense->bias, 0);
    fn(layer->output->dense->weight, 1);
  }
}

void SetOps(BertLayerImpl& layer, const model::ParallelOps* ops) {
  layer.attention->self->tp = ops;
  layer.attention->output->tp = ops;
  layer.intermediate->tp = ops;
  layer.output->tp = ops;
}

}  // namespace

void BertForSequenceClassificationImpl::ShardForTensorParallel(const model::ParallelOps* ops) {
  const int T = ops->world(), r = ops->rank();
  model::CheckTensorSplit("BERT", config_.num_attention_heads, config_.intermediate_size, T);
  if (tp_ != nullptr) throw std::logic_error("ShardForTensorParallel called twice: the weights are cut already");
  torch::NoGradGuard no_grad;
  ForEachCut(bert->layers, [&](torch::Tensor& p, int dim) { model::KeepBlock(p, dim, r, T); });
  for (const auto& module : *bert->layers) {
    auto* layer = module->as<BertLayer>();
    auto& self = *layer->attention->self;
    // Heads are contiguous blocks of head_size rows of Q, K and V (and columns of the output).
    self.total_heads = config_.num_attention_heads;
    self.num_heads = config_.num_attention_heads / T;
    self.head_offset = r * self.num_heads;
    SetOps(*layer, ops);
  }
  tp_ = ops;
}

void BertForSequenceClassificationImpl::UnshardTensorParallel() {
  if (tp_ == nullptr) return;
  torch::NoGradGuard no_grad;
  ForEachCut(bert->layers, [&](torch::Tensor& p, int dim) { p.set_data(tp_->GatherBlocks(p, dim)); });
  for (const auto& module : *bert->layers) {
    auto* layer = module->as<BertLayer>();
    auto& self = *layer->attention->self;
    self.num_heads = config_.num_attention_heads;
    self.total_heads = 0;
    self.head_offset = 0;
    SetOps(*layer, nullptr);
  }
  tp_ = nullptr;
}

std::vector<model::Unit> BertForSequenceClassificationImpl::Units() {
  return model::EncoderUnits(*this, "bert.embeddings.", "bert.encoder.layer.", config_.num_hidden_layers,
                             {"bert.pooler.", "classifier."});
}

}  // namespace distlm::bert
