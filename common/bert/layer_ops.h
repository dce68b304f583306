// What BERT's encoder and ViT's (common/vit) compute the same way, in one place: the fused
// linear layer and the feed-forward activation named by config.json's hidden_act.
#pragma once

#include <string>

#include <torch/types.h>
#include <torch/nn/modules/linear.h>

namespace distlm::bert {

// A Linear layer through at::linear, which multiplies a contiguous [batch, seq, in] input as
// one [batch * seq, in] addmm with the bias folded into the product. The C++ frontend's
// Linear::forward goes through matmul and then adds the bias in a separate pass over the
// output (and its backward through another node).
inline torch::Tensor ApplyLinear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return torch::linear(x, layer->weight, layer->bias);
}

// hidden_act: "gelu" (exact, x * Phi(x) with erf), "gelu_new" (the tanh approximation), else
// "relu" (the configs' Validate refuses any other name).
inline torch::Tensor Activation(const std::string& hidden_act, const torch::Tensor& h) {
  if (hidden_act == "gelu") return torch::gelu(h);
  if (hidden_act == "gelu_new") return torch::gelu(h, "tanh");
  return torch::relu(h);
}

}  // namespace distlm::bert
