#include "common/model/tensor_parallel_split.h"

#include <stdexcept>

#include <torch/utils.h>

#include "common/model/transformer_layer.h"

namespace distlm::model {
namespace {

// Each cut parameter of `layer` with the dimension it is cut along (0 rows, 1 columns).
template <typename Fn>
void ForEachCut(TransformerLayerImpl& layer, Fn&& fn) {
  auto& self = *layer.attention->self;
  for (torch::nn::Linear* l : {&self.query, &self.key, &self.value}) {
    fn((*l)->weight, 0);
    if ((*l)->bias.defined()) fn((*l)->bias, 0);
  }
  fn(layer.attention->output->dense->weight, 1);
  fn(layer.intermediate->dense->weight, 0);
  fn(layer.intermediate->dense->bias, 0);
  fn(layer.output->dense->weight, 1);
}

void CheckSplit(const std::string& model, int64_t heads, int64_t intermediate, int world) {
  if (heads % world == 0 && intermediate % world == 0) return;
  throw std::invalid_argument("tensor parallelism over " + std::to_string(world) + " ranks needs the " + model +
                              "'s heads (" + std::to_string(heads) + ") and intermediate size (" +
                              std::to_string(intermediate) + ") to divide by it");
}

}  // namespace

void ShardLayers(torch::nn::ModuleList& layers, const ParallelOps* ops, const std::string& model) {
  const int world = ops->world(), rank = ops->rank();
  for (const auto& module : *layers) {
    const auto& layer = *module->as<TransformerLayerImpl>();
    const auto& self = *layer.attention->self;
    CheckSplit(model, self.query->weight.size(0) / self.head_size, layer.intermediate->dense->weight.size(0), world);
  }
  torch::NoGradGuard no_grad;
  for (const auto& module : *layers) {
    auto& layer = *module->as<TransformerLayerImpl>();
    // Heads are contiguous blocks of head_size rows of Q, K and V (and columns of the output).
    ForEachCut(layer, [&](torch::Tensor& p, int64_t dim) {
      const int64_t n = p.size(dim) / world;
      p.set_data(p.detach().narrow(dim, rank * n, n).clone());
    });
    layer.UseOps(ops);
  }
}

void UnshardLayers(torch::nn::ModuleList& layers) {
  torch::NoGradGuard no_grad;
  for (const auto& module : *layers) {
    auto& layer = *module->as<TransformerLayerImpl>();
    const ParallelOps& ops = layer.ops();
    ForEachCut(layer, [&](torch::Tensor& p, int64_t dim) { p.set_data(ops.GatherBlocks(p, dim)); });
    layer.UseOps(&SingleProcessOps());
  }
}

}  // namespace distlm::model
