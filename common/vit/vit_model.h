// A Vision Transformer for image classification as torch::nn modules, the second model family
// of the course: the stages' mechanisms (gradient synchronisation, DDP, sharding) do not
// care which model made the gradients.
//
// Module and parameter names are exactly HuggingFace's ViTForImageClassification
// (vit.embeddings.cls_token, vit.encoder.layer.0.attention.attention.query.weight, ...), so a
// state dict maps one to one onto its checkpoints. The maths follows transformers' eager ViT:
// non-overlapping patches by a strided convolution, a learned [CLS] token and position
// embeddings, pre-norm encoder layers (LayerNorm before attention and before the MLP, residual
// after each), a final LayerNorm, and a linear head on the [CLS] token. No pooler.
#pragma once

#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>

#include "common/model/parallel_ops.h"
#include "common/model/transformer_layer.h"
#include "common/model/unit_hooks.h"
#include "common/model/units_batch.h"
#include "common/vit/vit_config.h"

namespace distlm::vit {

// Images [batch, channels, H, W] to patch vectors [batch, patches, hidden].
class ViTPatchEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit ViTPatchEmbeddingsImpl(const ViTConfig& config);
  torch::Tensor forward(const torch::Tensor& pixel_values);

  torch::nn::Conv2d projection{nullptr};
  int64_t image_size, num_channels;
};
TORCH_MODULE(ViTPatchEmbeddings);

class ViTEmbeddingsImpl : public torch::nn::Module {
 public:
  explicit ViTEmbeddingsImpl(const ViTConfig& config);
  torch::Tensor forward(const torch::Tensor& pixel_values);

  torch::Tensor cls_token;            // [1, 1, hidden]
  torch::Tensor position_embeddings;  // [1, tokens, hidden]
  ViTPatchEmbeddings patch_embeddings{nullptr};
  double dropout_p;
};
TORCH_MODULE(ViTEmbeddings);

// The encoder layers are model::TransformerLayer in its pre-norm layout (HuggingFace's ViTLayer
// names): common/model/transformer_layer.h.

class ViTEncoderImpl : public torch::nn::Module {
 public:
  explicit ViTEncoderImpl(const ViTConfig& config);
  // Layer i runs as unit i + 1 through `hooks` (null: none; unit 0 is the embeddings).
  torch::Tensor forward(torch::Tensor hidden, const model::UnitHooks* hooks = nullptr);

  torch::nn::ModuleList layer{nullptr};  // model::TransformerLayer
};
TORCH_MODULE(ViTEncoder);

class ViTModelImpl : public torch::nn::Module {
 public:
  explicit ViTModelImpl(const ViTConfig& config);
  // The final LayerNorm's output, [batch, tokens, hidden].
  torch::Tensor forward(const torch::Tensor& pixel_values);
  // The embeddings and the encoder layers (units 0 to num_hidden_layers, through `hooks`;
  // null: none), before the final LayerNorm.
  torch::Tensor Encode(const torch::Tensor& pixel_values, const model::UnitHooks* hooks = nullptr);

  ViTEmbeddings embeddings{nullptr};
  ViTEncoder encoder{nullptr};
  torch::nn::LayerNorm layernorm{nullptr};
};
TORCH_MODULE(ViTModel);

struct ViTOutputs {
  torch::Tensor logits;  // [batch, num_labels]
  torch::Tensor loss;    // mean cross-entropy; undefined without labels
};

class ViTForImageClassificationImpl : public torch::nn::Module {
 public:
  explicit ViTForImageClassificationImpl(const ViTConfig& config);
  // pixel_values: float [batch, channels, image_size, image_size]; labels: long [batch] or
  // undefined.
  ViTOutputs forward(const torch::Tensor& pixel_values, const torch::Tensor& labels = {});

  // transformers' _init_weights: linear and convolution weights, [CLS] and position embeddings
  // N(0, initializer_range) (its truncation at +-2 never bites at 0.02), biases 0, LayerNorm 1
  // and 0. Uses the current seed.
  void InitWeights();
  const ViTConfig& config() const { return config_; }

  // The units forward runs in turn (model/unit_hooks.h): the embeddings, each encoder layer,
  // then the head (the final LayerNorm and the classifier). `hooks` (null: none) wraps each
  // from then on; the caller keeps them alive.
  std::vector<model::Unit> Units();
  void set_unit_hooks(const model::UnitHooks* hooks) { hooks_ = hooks; }

  // Task 7a, Megatron-LM's split as BERT's: every encoder layer keeps this rank's block of heads
  // (the rows of query, key and value; the columns of the attention's output projection) and of
  // the MLP (the intermediate's rows, the output's columns), and runs those products through
  // `ops` (kept, not owned). The embeddings, the LayerNorms and the head stay whole on every
  // rank. std::invalid_argument when the heads or the intermediate size do not divide by the
  // ranks. UnshardTensorParallel gathers the blocks back (a collective) and runs whole again.
  void ShardForTensorParallel(const model::ParallelOps* ops);
  void UnshardTensorParallel();
  bool tensor_parallel() const { return tp_ != nullptr; }

  // A batch as task 7b's pipeline runs it (model/units_batch.h): pixel_values [B, C, H, W] and
  // labels [B] cut into `parts` micro-batches along the batch; units first..last on one of them
  // (the last unit returns the micro-batch's mean loss). std::invalid_argument when `parts`
  // does not divide B.
  model::UnitsBatch BatchForUnits(const torch::Tensor& pixel_values, const torch::Tensor& labels, int parts);

  ViTModel vit{nullptr};
  torch::nn::Linear classifier{nullptr};

 private:
  // Units first..last (0 the embeddings, 1..L the layers, L + 1 the head) from `hidden`, unit
  // first - 1's output (unused when first is 0, which embeds `pixel_values`).
  torch::Tensor ForwardUnits(int first, int last, const torch::Tensor& hidden, const torch::Tensor& pixel_values);
  torch::Tensor Head(const torch::Tensor& encoded);

  ViTConfig config_;
  const model::UnitHooks* hooks_ = nullptr;
  const model::ParallelOps* tp_ = nullptr;  // set while the encoder is cut
};
TORCH_MODULE(ViTForImageClassification);

}  // namespace distlm::vit
