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

#include "common/model/dropout.h"
#include "common/model/parallel_ops.h"
#include "common/model/tensor_parallel_split.h"
#include "common/runtime/errors.h"

namespace distlm::vit {

using distlm::model::Dropout;

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

namespace {

// The pre-norm layout, and query, key and value with or without their biases (qkv_bias).
model::TransformerLayerOptions LayerOptions(const ViTConfig& c) {
  model::TransformerLayerOptions o = model::LayerOptionsOf(c);
  o.qkv_bias = c.qkv_bias;
  o.pre_norm = true;
  return o;
}

}  // namespace

ViTEncoderImpl::ViTEncoderImpl(const ViTConfig& c) {
  layer = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layer->push_back(model::TransformerLayer(LayerOptions(c)));
}

torch::Tensor ViTEncoderImpl::forward(torch::Tensor hidden, const model::UnitHooks* hooks) {
  int u = 0;
  for (const auto& l : *layer) {
    hidden = model::RunUnit(hooks, ++u, [&] { return l->as<model::TransformerLayer>()->forward(hidden); });
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
    return classifier(vit->layernorm(encoded).select(1, 0));  // the [CLS] token
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
    out = model::RunUnit(hooks_, u, [&] { return vit->encoder->layer[u - 1]->as<model::TransformerLayer>()->forward(out); });
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

void ViTForImageClassificationImpl::ShardForTensorParallel(const model::ParallelOps* ops) {
  if (tp_ != nullptr) throw std::logic_error("ShardForTensorParallel called twice: the weights are cut already");
  model::ShardLayers(vit->encoder->layer, ops, "ViT");
  tp_ = ops;
}

void ViTForImageClassificationImpl::UnshardTensorParallel() {
  if (tp_ == nullptr) return;
  model::UnshardLayers(vit->encoder->layer);
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
