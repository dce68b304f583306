#include "common/model/transformer_layer.h"

#include <cmath>

#include <torch/version.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "common/model/dropout.h"

namespace distlm::model {
namespace {

torch::nn::LayerNorm MakeLayerNorm(const TransformerLayerOptions& o) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.hidden_size}).eps(o.layer_norm_eps));
}

}  // namespace

torch::Tensor Activation(const std::string& hidden_act, const torch::Tensor& h) {
  if (hidden_act == "gelu") return torch::gelu(h);
  if (hidden_act == "gelu_new") return torch::gelu(h, "tanh");
  return torch::relu(h);
}

SelfAttentionImpl::SelfAttentionImpl(const TransformerLayerOptions& o)
    : head_size(o.hidden_size / o.num_attention_heads), dropout_p(o.attention_dropout), ops(&SingleProcessOps()) {
  auto linear = [&](const char* name) {
    return register_module(name, torch::nn::Linear(torch::nn::LinearOptions(o.hidden_size, o.hidden_size).bias(o.qkv_bias)));
  };
  query = linear("query");
  key = linear("key");
  value = linear("value");
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask) {
  const int64_t batch = hidden.size(0), seq = hidden.size(1), d = head_size;
  const int64_t heads = query->weight.size(0) / d;  // the heads these weights hold
  // One product for query, key and value: the three weights side by side (their gradients flow
  // back to the three parameters through the concatenation), so a split passes one f, not three.
  const torch::Tensor w = torch::cat({query->weight, key->weight, value->weight});
  const torch::Tensor b = query->bias.defined() ? torch::cat({query->bias, key->bias, value->bias}) : torch::Tensor();
  // [batch, seq, 3 * heads * d] -> [3, batch * heads, seq, d], one copy for all three.
  auto qkv = ops->ColumnLinear(hidden, w, b)
                 .view({batch, seq, 3, heads, d})
                 .permute({2, 0, 3, 1, 4})
                 .contiguous()
                 .view({3, batch * heads, seq, d});
  // unbind, not qkv[i]: its backward stacks the three gradients once instead of filling three
  // full-size zero tensors.
  auto parts = qkv.unbind(0);
  const torch::Tensor &q = parts[0], &k = parts[1], &v = parts[2];
#if TORCH_VERSION_MAJOR >= 2
  // LibTorch 2.x: the fused kernel (on CPU, a blocked flash attention with an online softmax:
  // the [seq, seq] scores never exist whole). It draws attention dropout from its own
  // generator, so it serves only where there is none (eval, or attention dropout 0); training
  // with attention dropout keeps the product below and distlm's dropout, which the seed and
  // snapshots decide.
  if (!(is_training() && dropout_p > 0)) {
    const c10::optional<torch::Tensor> mask =
        additive_mask.defined() ? c10::optional<torch::Tensor>(additive_mask) : c10::nullopt;
    auto ctx = at::scaled_dot_product_attention(q.view({batch, heads, seq, d}), k.view({batch, heads, seq, d}),
                                                v.view({batch, heads, seq, d}), mask);
    return ctx.permute({0, 2, 1, 3}).reshape({batch, seq, heads * d});
  }
#endif
  // scores = mask + (q k^T) / sqrt(head_size) in one batched product: the mask row of each
  // example is broadcast over heads and query positions.
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  torch::Tensor scores;
  if (additive_mask.defined()) {
    auto mask = additive_mask.expand({batch, heads, 1, seq}).reshape({batch * heads, 1, seq});
    scores = torch::baddbmm(mask, q, k.transpose(1, 2), /*beta=*/1.0, /*alpha=*/scale);
  } else {
    scores = torch::bmm(q, k.transpose(1, 2)).mul_(scale);
  }
  // Each element's dropout bit is the one the whole model's would get (its head's place among
  // all the heads), so a split trains as one process does.
  auto probs = DropoutOfHeads(torch::softmax(scores, -1), dropout_p, is_training(), heads * ops->world(),
                              ops->rank() * heads, heads);
  // [batch * heads, seq, d] -> [batch, seq, heads * d]
  return torch::bmm(probs, v).view({batch, heads, seq, d}).permute({0, 2, 1, 3}).reshape({batch, seq, heads * d});
}

ResidualOutputImpl::ResidualOutputImpl(int64_t in_features, const TransformerLayerOptions& o)
    : dropout_p(o.hidden_dropout), ops(&SingleProcessOps()) {
  dense = register_module("dense", torch::nn::Linear(in_features, o.hidden_size));
  if (!o.pre_norm) LayerNorm = register_module("LayerNorm", MakeLayerNorm(o));
}

torch::Tensor ResidualOutputImpl::forward(const torch::Tensor& x, const torch::Tensor& residual) {
  torch::Tensor y = Dropout(ops->RowLinear(x, dense->weight, dense->bias), dropout_p, is_training()) + residual;
  return LayerNorm.is_empty() ? y : LayerNorm(y);
}

AttentionBlockImpl::AttentionBlockImpl(const TransformerLayerOptions& o) {
  self = register_module(o.pre_norm ? "attention" : "self", SelfAttention(o));
  output = register_module("output", ResidualOutput(o.hidden_size, o));
}

torch::Tensor AttentionBlockImpl::forward(const torch::Tensor& input, const torch::Tensor& residual,
                                          const torch::Tensor& additive_mask) {
  return output(self(input, additive_mask), residual);
}

IntermediateImpl::IntermediateImpl(const TransformerLayerOptions& o) : act(o.hidden_act), ops(&SingleProcessOps()) {
  dense = register_module("dense", torch::nn::Linear(o.hidden_size, o.intermediate_size));
}

torch::Tensor IntermediateImpl::forward(const torch::Tensor& x) {
  return Activation(act, ops->ColumnLinear(x, dense->weight, dense->bias));
}

TransformerLayerImpl::TransformerLayerImpl(const TransformerLayerOptions& o) {
  attention = register_module("attention", AttentionBlock(o));
  intermediate = register_module("intermediate", Intermediate(o));
  output = register_module("output", ResidualOutput(o.intermediate_size, o));
  if (o.pre_norm) {
    layernorm_before = register_module("layernorm_before", MakeLayerNorm(o));
    layernorm_after = register_module("layernorm_after", MakeLayerNorm(o));
  }
}

torch::Tensor TransformerLayerImpl::forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask) {
  if (layernorm_before.is_empty()) {  // post-norm: the LayerNorms close each block
    torch::Tensor h = attention(hidden, hidden, additive_mask);
    return output(intermediate(h), h);
  }
  torch::Tensor h = attention(layernorm_before(hidden), hidden, additive_mask);
  return output(intermediate(layernorm_after(h)), h);
}

void TransformerLayerImpl::UseOps(const ParallelOps* ops) {
  attention->self->ops = ops;
  attention->output->ops = ops;
  intermediate->ops = ops;
  output->ops = ops;
}

}  // namespace distlm::model
