// The encoder layer BERT and the ViT share: multi-head self-attention and a feed-forward
// block, each with a residual, the LayerNorms after each block (BERT) or before (the ViT).
//
// Module and parameter names are HuggingFace's for each family, so a state dict maps one to one
// onto its checkpoints: post-norm layers are named as BertLayer (attention.self.query,
// attention.output.LayerNorm, output.LayerNorm), pre-norm layers as ViTLayer
// (attention.attention.query, layernorm_before, layernorm_after).
//
// The layer does not know whether it is split. Its matrix products go through the
// ParallelOps it holds: the single process's (plain products) unless tensor_parallel_split.h
// cut its weights and handed it others. It reads how many heads it holds from its query
// weight's rows.
#pragma once

#include <string>

#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "common/model/parallel_ops.h"

namespace distlm::model {

struct TransformerLayerOptions {
  int64_t hidden_size = 0, num_attention_heads = 0, intermediate_size = 0;
  std::string hidden_act;  // "gelu", "gelu_new" or "relu"
  double layer_norm_eps = 1e-12;
  double attention_dropout = 0, hidden_dropout = 0;
  bool qkv_bias = true;
  bool pre_norm = false;  // the ViT's layout and names; false: BERT's
};

// The layer's options from a model's config.json fields (BertConfig, ViTConfig: the same names).
template <typename Config>
TransformerLayerOptions LayerOptionsOf(const Config& c) {
  TransformerLayerOptions o;
  o.hidden_size = c.hidden_size;
  o.num_attention_heads = c.num_attention_heads;
  o.intermediate_size = c.intermediate_size;
  o.hidden_act = c.hidden_act;
  o.layer_norm_eps = c.layer_norm_eps;
  o.attention_dropout = c.attention_probs_dropout_prob;
  o.hidden_dropout = c.hidden_dropout_prob;
  return o;
}

// Query, key and value projections and scaled dot-product attention over the heads these
// weights hold.
class SelfAttentionImpl : public torch::nn::Module {
 public:
  explicit SelfAttentionImpl(const TransformerLayerOptions& options);
  // hidden [batch, seq, hidden]; additive_mask [batch, 1, 1, seq] (0 for tokens, -10000 for
  // padding) or undefined for none. Returns [batch, seq, heads held x head_size].
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask);

  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr};
  int64_t head_size;
  double dropout_p;
  const ParallelOps* ops;
};
TORCH_MODULE(SelfAttention);

// dense, dropout and the residual; with a LayerNorm after the sum in the post-norm layout.
class ResidualOutputImpl : public torch::nn::Module {
 public:
  ResidualOutputImpl(int64_t in_features, const TransformerLayerOptions& options);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& residual);

  torch::nn::Linear dense{nullptr};
  torch::nn::LayerNorm LayerNorm{nullptr};  // HuggingFace's name; null in the pre-norm layout
  double dropout_p;
  const ParallelOps* ops;
};
TORCH_MODULE(ResidualOutput);

class AttentionBlockImpl : public torch::nn::Module {
 public:
  explicit AttentionBlockImpl(const TransformerLayerOptions& options);
  // Attention over `input` (the hidden state, or its LayerNorm in the pre-norm layout), added
  // to `residual`.
  torch::Tensor forward(const torch::Tensor& input, const torch::Tensor& residual,
                        const torch::Tensor& additive_mask);

  SelfAttention self{nullptr};  // registered as "self" (BERT) or "attention" (ViT)
  ResidualOutput output{nullptr};
};
TORCH_MODULE(AttentionBlock);

class IntermediateImpl : public torch::nn::Module {
 public:
  explicit IntermediateImpl(const TransformerLayerOptions& options);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear dense{nullptr};
  std::string act;
  const ParallelOps* ops;
};
TORCH_MODULE(Intermediate);

class TransformerLayerImpl : public torch::nn::Module {
 public:
  explicit TransformerLayerImpl(const TransformerLayerOptions& options);
  // hidden [batch, seq, hidden]; additive_mask as SelfAttention's (undefined: none).
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask = {});

  // The products of every module below go through `ops` (kept, not owned) from now on.
  void UseOps(const ParallelOps* ops);
  const ParallelOps& ops() const { return *attention->self->ops; }

  AttentionBlock attention{nullptr};
  Intermediate intermediate{nullptr};
  ResidualOutput output{nullptr};
  torch::nn::LayerNorm layernorm_before{nullptr}, layernorm_after{nullptr};  // pre-norm only
};
TORCH_MODULE(TransformerLayer);

// hidden_act: "gelu" (exact, x * Phi(x) with erf), "gelu_new" (the tanh approximation), else
// "relu" (the configs' Validate refuses any other name).
torch::Tensor Activation(const std::string& hidden_act, const torch::Tensor& h);

}  // namespace distlm::model
