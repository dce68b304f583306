#include "common/vit/vit_model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/functional.h>
#include <torch/utils.h>

#include "common/bert/dropout.h"
#include "common/bert/layer_ops.h"
#include "common/model/parallel_ops.h"
#include "common/runtime/errors.h"

namespace distlm::vit {

using distlm::bert::Activation;
using distlm::bert::ApplyLinear;
using distlm::bert::Dropout;

ViTPatchEmbeddingsImpl::ViTPatchEmbeddingsImpl(const ViTConfig& c)
    : image_size(c.image_size), num_channels(c.num_channels) {
  projection = register_module(
      "projection", torch::nn::Conv2d(torch::nn::Conv2dOptions(c.num_channels, c.hidden_size, c.patch_size)
                                          .stride(c.patch_size)
                                          .bias(true)));
}

torch::Tensor ViTPatchEmbeddingsImpl::forward(const torch::Tensor& pixel_values) {
  if (pixel_values.dim() != 4 || pixel_values.size(1) != num_channels || pixel_values.size(2) != image_size ||
      pixel_values.size(3) != image_size) {
    throw UserError("pixel_values has shape " + c10::str(pixel_values.sizes()) + "; this ViT takes [batch, " +
                    std::to_string(num_channels) + ", " + std::to_string(image_size) + ", " +
                    std::to_string(image_size) + "]");
  }
  // [B, hidden, n, n] -> [B, n*n, hidden], patches in row-major order as transformers has them.
  return projection(pixel_values).flatten(2).transpose(1, 2);
}

ViTEmbeddingsImpl::ViTEmbeddingsImpl(const ViTConfig& c) : dropout_p(c.hidden_dropout_prob) {
  cls_token = register_parameter("cls_token", torch::zeros({1, 1, c.hidden_size}));
  position_embeddings = register_parameter("position_embeddings", torch::zeros({1, c.num_tokens(), c.hidden_size}));
  patch_embeddings = register_module("patch_embeddings", ViTPatchEmbeddings(c));
}

torch::Tensor ViTEmbeddingsImpl::forward(const torch::Tensor& pixel_values) {
  torch::Tensor patches = patch_embeddings(pixel_values);
  torch::Tensor cls = cls_token.expand({patches.size(0), -1, -1});
  torch::Tensor x = torch::cat({cls, patches}, 1) + position_embeddings;
  return Dropout(x, dropout_p, is_training());
}

ViTSelfAttentionImpl::ViTSelfAttentionImpl(const ViTConfig& c)
    : num_heads(c.num_attention_heads),
      head_size(c.hidden_size / c.num_attention_heads),
      dropout_p(c.attention_probs_dropout_prob) {
  auto linear = [&](const char* name) {
    return register_module(name, torch::nn::Linear(torch::nn::LinearOptions(c.hidden_size, c.hidden_size).bias(c.qkv_bias)));
  };
  query = linear("query");
  key = linear("key");
  value = linear("value");
}

torch::Tensor ViTSelfAttentionImpl::forward(const torch::Tensor& hidden) {
  const int64_t B = hidden.size(0), T = hidden.size(1);
  auto heads = [&](const torch::Tensor& x) { return x.view({B, T, num_heads, head_size}).transpose(1, 2); };
  torch::Tensor q, k, v;
  if (tp == nullptr) {
    q = heads(ApplyLinear(query, hidden)), k = heads(ApplyLinear(key, hidden)), v = heads(ApplyLinear(value, hidden));
  } else {
    // One column-parallel product for this rank's heads of all three (one all-reduce of the
    // input's gradient in backward, not three).
    torch::Tensor b = query->bias.defined() ? torch::cat({query->bias, key->bias, value->bias}) : torch::Tensor();
    auto qkv = tp->ColumnLinear(hidden, torch::cat({query->weight, key->weight, value->weight}), b).chunk(3, -1);
    q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  }
  torch::Tensor scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_size));
  torch::Tensor probs = torch::softmax(scores, -1);
  // Split by heads, each rank draws its heads' bits of the whole model's mask.
  probs = tp == nullptr ? Dropout(probs, dropout_p, is_training())
                        : bert::DropoutOfHeads(probs.reshape({B * num_heads, T, T}), dropout_p, is_training(),
                                               total_heads, head_offset, num_heads)
                              .view({B, num_heads, T, T});
  return torch::matmul(probs, v).transpose(1, 2).contiguous().view({B, T, num_heads * head_size});
}

ViTDenseOutputImpl::ViTDenseOutputImpl(int64_t in_features, const ViTConfig& c) : dropout_p(c.hidden_dropout_prob) {
  dense = register_module("dense", torch::nn::Linear(in_features, c.hidden_size));
}

torch::Tensor ViTDenseOutputImpl::forward(const torch::Tensor& x) {
  const torch::Tensor y = tp == nullptr ? ApplyLinear(dense, x) : tp->RowLinear(x, dense->weight, dense->bias);
  return Dropout(y, dropout_p, is_training());
}

ViTAttentionImpl::ViTAttentionImpl(const ViTConfig& c) {
  attention = register_module("attention", ViTSelfAttention(c));
  output = register_module("output", ViTDenseOutput(c.hidden_size, c));
}

torch::Tensor ViTAttentionImpl::forward(const torch::Tensor& hidden) { return output(attention(hidden)); }

ViTIntermediateImpl::ViTIntermediateImpl(const ViTConfig& c) : act(c.hidden_act) {
  dense = register_module("dense", torch::nn::Linear(c.hidden_size, c.intermediate_size));
}

torch::Tensor ViTIntermediateImpl::forward(const torch::Tensor& x) {
  return Activation(act, tp != nullptr ? tp->ColumnLinear(x, dense->weight, dense->bias) : ApplyLinear(dense, x));
}

ViTLayerImpl::ViTLayerImpl(const ViTConfig& c) {
  attention = register_module("attention", ViTAttention(c));
  intermediate = register_module("intermediate", ViTIntermediate(c));
  output = register_module("output", ViTDenseOutput(c.intermediate_size, c));
  auto norm = torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps);
  layernorm_before = register_module("layernorm_before", torch::nn::LayerNorm(norm));
  layernorm_after = register_module("layernorm_after", torch::nn::LayerNorm(norm));
}

torch::Tensor ViTLayerImpl::forward(const torch::Tensor& hidden) {
  torch::Tensor h = attention(layernorm_before(hidden)) + hidden;  // pre-norm, then the residual
  return output(intermediate(layernorm_after(h))) + h;
}

ViTEncoderImpl::ViTEncoderImpl(const ViTConfig& c) {
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layer->push_back(ViTLayer(c));
}

torch::Tensor ViTEncoderImpl::forward(torch::Tensor hidden, const model::UnitHooks* hooks) {
  int u = 0;
  for (const auto& l : *layer) {
    hidden = model::RunUnit(hooks, ++u, [&] { return l->as<ViTLayer>()->forward(hidden); });
  }
  return hidden;
}

ViTModelImpl::ViTModelImpl(const ViTConfig& c) {
  embeddings = register_module("embeddings", ViTEmbeddings(c));
  encoder = register_module("encoder", ViTEncoder(c));
  layernorm = register_module("layernorm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden_size}).eps(c.layer_norm_eps)));
}

torch::Tensor ViTModelImpl::forward(const torch::Tensor& pixel_values) { return layernorm(Encode(pixel_values)); }

torch::Tensor ViTModelImpl::Encode(const torch::Tensor& pixel_values, const model::UnitHooks* hooks) {
  return encoder->forward(model::RunUnit(hooks, 0, [&] { return embeddings(pixel_values); }), hooks);
}

ViTForImageClassificationImpl::ViTForImageClassificationImpl(const ViTConfig& c) : config_(c) {
  c.Validate("the ViT config");
  vit = register_module("vit", ViTModel(c));
  classifier = register_module("classifier", torch::nn::Linear(c.hidden_size, c.num_labels));
  InitWeights();
}

ViTOutputs ViTForImageClassificationImpl::forward(const torch::Tensor& pixel_values, const torch::Tensor& labels) {
  ViTOutputs out;
  torch::Tensor encoded = vit->Encode(pixel_values, hooks_);
  out.logits = Head(encoded);
  if (labels.defined()) out.loss = torch::nn::functional::cross_entropy(out.logits, labels);
  return out;
}

torch::Tensor ViTForImageClassificationImpl::Head(const torch::Tensor& encoded) {
  return model::RunUnit(hooks_, static_cast<int>(config_.num_hidden_layers) + 1, [&] {
    return ApplyLinear(classifier, vit->layernorm(encoded).select(1, 0));  // the [CLS] token
  });
}

torch::Tensor ViTForImageClassificationImpl::ForwardUnits(int first, int last, const torch::Tensor& hidden,
                                                          const torch::Tensor& pixel_values) {
  const int layers = static_cast<int>(config_.num_hidden_layers);
  if (first < 0 || last > layers + 1 || first > last) {
    throw std::invalid_argument("units " + std::to_string(first) + " to " + std::to_string(last) +
                                " of a ViT with units 0 to " + std::to_string(layers + 1));
  }
  torch::Tensor out = hidden;
  if (first == 0) out = model::RunUnit(hooks_, 0, [&] { return vit->embeddings(pixel_values); });
  for (int u = std::max(first, 1); u <= std::min(last, layers); ++u) {
    out = model::RunUnit(hooks_, u, [&] { return vit->encoder->layer[u - 1]->as<ViTLayer>()->forward(out); });
  }
  return last == layers + 1 ? Head(out) : out;
}

model::UnitsBatch ViTForImageClassificationImpl::BatchForUnits(const torch::Tensor& pixel_values,
                                                               const torch::Tensor& labels, int parts) {
  const int64_t b = pixel_values.size(0);
  if (parts < 1 || b % parts != 0) {
    throw std::invalid_argument(std::to_string(parts) + " micro-batches do not divide the batch of " +
                                std::to_string(b));
  }
  const int64_t rows = b / parts;
  const int64_t patches = config_.image_size / config_.patch_size;
  const int head = static_cast<int>(config_.num_hidden_layers) + 1;
  model::UnitsBatch out;
  out.parts = parts;
  out.activation_shape = {rows, patches * patches + 1, config_.hidden_size};  // the patches and [CLS]
  // The batch keeps the module alive (a TORCH_MODULE holder owns it through a shared_ptr).
  auto self = std::dynamic_pointer_cast<ViTForImageClassificationImpl>(shared_from_this());
  out.forward = [self, pixel_values, labels, rows, head](int first, int last, const torch::Tensor& input, int part) {
    torch::Tensor y = self->ForwardUnits(first, last, input, pixel_values.narrow(0, part * rows, rows));
    return last == head ? torch::nn::functional::cross_entropy(y, labels.narrow(0, part * rows, rows)) : y;
  };
  return out;
}

std::vector<model::Unit> ViTForImageClassificationImpl::Units() {
  return model::EncoderUnits(*this, "vit.embeddings.", "vit.encoder.layer.", config_.num_hidden_layers,
                             {"vit.layernorm.", "classifier."});
}

namespace {

// Every encoder layer's cut parameters with the dimension each is cut along (0 rows, 1
// columns): the heads' rows of query, key and value, the attention output's columns, the
// intermediate's rows, the output's columns. `fn(tensor, dim)`; then `each_layer(layer)`.
template <typename Fn, typename Each>
void ForEachCut(torch::nn::ModuleList& layers, Fn&& fn, Each&& each_layer) {
  for (const auto& module : *layers) {
    auto* layer = module->as<ViTLayer>();
    auto& self = *layer->attention->attention;
    for (torch::nn::Linear* l : {&self.query, &self.key, &self.value}) {
      fn((*l)->weight, 0);
      if ((*l)->bias.defined()) fn((*l)->bias, 0);
    }
    fn(layer->attention->output->dense->weight, 1);
    fn(layer->intermediate->dense->weight, 0);
    fn(layer->intermediate->dense->bias, 0);
    fn(layer->output->dense->weight, 1);
    each_layer(*layer);
  }
}

void SetOps(ViTLayerImpl& layer, const model::ParallelOps* ops, int64_t total_heads, int rank) {
  auto& self = *layer.attention->attention;
  const int world = ops == nullptr ? 1 : ops->world();
  self.num_heads = total_heads / world;
  self.total_heads = ops == nullptr ? 0 : total_heads;
  self.head_offset = ops == nullptr ? 0 : rank * self.num_heads;
  self.tp = ops;
  layer.attention->output->tp = ops;
  layer.intermediate->tp = ops;
  layer.output->tp = ops;
}

}  // namespace

void ViTForImageClassificationImpl::ShardForTensorParallel(const model::ParallelOps* ops) {
  const int T = ops->world(), r = ops->rank();
  model::CheckTensorSplit("ViT", config_.num_attention_heads, config_.intermediate_size, T);
  if (tp_ != nullptr) throw std::logic_error("ShardForTensorParallel called twice: the weights are cut already");
  torch::NoGradGuard no_grad;
  ForEachCut(
      vit->encoder->layer,
      [&](torch::Tensor& p, int dim) { model::KeepBlock(p, dim, r, T); },
      [&](ViTLayerImpl& layer) { SetOps(layer, ops, config_.num_attention_heads, r); });
  tp_ = ops;
}

void ViTForImageClassificationImpl::UnshardTensorParallel() {
  if (tp_ == nullptr) return;
  torch::NoGradGuard no_grad;
  ForEachCut(
      vit->encoder->layer, [&](torch::Tensor& p, int dim) { p.set_data(tp_->GatherBlocks(p, dim)); },
      [&](ViTLayerImpl& layer) { SetOps(layer, nullptr, config_.num_attention_heads, 0); });
  tp_ = nullptr;
}

void ViTForImageClassificationImpl::InitWeights() {
  torch::NoGradGuard no_grad;
  const double std = config_.initializer_range;
  for (auto& m : modules(/*include_self=*/false)) {
    if (auto* linear = m->as<torch::nn::LinearImpl>()) {
      linear->weight.normal_(0.0, std);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* conv = m->as<torch::nn::Conv2dImpl>()) {
      conv->weight.normal_(0.0, std);
      if (conv->bias.defined()) conv->bias.zero_();
    } else if (auto* norm = m->as<torch::nn::LayerNormImpl>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
  vit->embeddings->cls_token.normal_(0.0, std);
  vit->embeddings->position_embeddings.normal_(0.0, std);
}

}  // namespace distlm::vit
